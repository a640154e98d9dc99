// The course website's own script (site/conf.py loads it on every page).
//
// The language switch keeps the reader's place: a link to this page in another language gets the
// section the reader is reading (the address's #anchor, or else the last section whose title has
// scrolled past the top of the window). A section has the same anchor in every language.
document.addEventListener("DOMContentLoaded", () => {
  const here = () => {
    if (window.location.hash) return window.location.hash.slice(1);
    let found = "";
    for (const section of document.querySelectorAll("article section[id]")) {
      if (section.getBoundingClientRect().top > window.innerHeight * 0.3) break;
      found = section.id;
    }
    return found;
  };
  for (const link of document.querySelectorAll(".language-switch a[hreflang]")) {
    const go = () => {
      const anchor = here();
      link.hash = anchor ? "#" + anchor : "";
    };
    link.addEventListener("click", go);
    link.addEventListener("auxclick", go);
    link.addEventListener("focus", go);
  }
});
