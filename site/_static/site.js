// The course website's own script (site/conf.py loads it on every page).
//
// The language switch keeps the reader's place: a link to this page in another language gets the
// section the reader is reading (the address's #anchor, or else the last section whose title has
// scrolled past the top of the window). A section has the same anchor in every language. The place is
// taken when the menu opens, before anything moves, and the page is kept where it was: opening the menu
// focuses its button, which sits in the sticky header, and the browser would scroll to it.
document.addEventListener("DOMContentLoaded", () => {
  const toggle = document.querySelector(".language-switch .dropdown-toggle");
  if (!toggle) return;
  const here = () => {
    if (window.location.hash) return window.location.hash.slice(1);
    let found = "";
    for (const section of document.querySelectorAll("article section[id]")) {
      if (section.getBoundingClientRect().top > window.innerHeight * 0.3) break;
      found = section.id;
    }
    return found;
  };
  let place = null;
  toggle.addEventListener("show.bs.dropdown", () => {
    place = {anchor: here(), y: window.scrollY};
  });
  toggle.addEventListener("shown.bs.dropdown", () => {
    if (place) window.scrollTo(window.scrollX, place.y);
  });
  for (const link of document.querySelectorAll(".language-switch a[hreflang]")) {
    const go = () => {
      const anchor = place ? place.anchor : here();
      link.hash = anchor ? "#" + anchor : "";
    };
    link.addEventListener("click", go);
    link.addEventListener("auxclick", go);
    link.addEventListener("focus", go);
  }
});
