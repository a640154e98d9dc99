// Three faults of Sphinx 9's search in a translated site, mended (site/conf.py loads this on every
// translated page, after Sphinx's translations.js and before its language_data.js).
//
// 1. translations.js (Sphinx's own messages in the page's language) states the plural rule as an
//    expression that may be a boolean, "(n != 1)", then indexes the pair of forms with it: forms[true] is
//    undefined and the search page stops before saying how many pages it found. An untranslated form is
//    an empty string, which says nothing. Use the rule as a number, and the English when a form is empty.
if (typeof Documentation !== "undefined" && Documentation.PLURAL_EXPR) {   // a const of doctools.js
  const rule = Documentation.PLURAL_EXPR;
  const ngettext = Documentation.ngettext;
  Documentation.PLURAL_EXPR = (n) => Number(rule(n));
  Documentation.ngettext = (singular, plural, n) =>
    ngettext(singular, plural, n) || (n === 1 ? singular : plural);
}
// 2. The Chinese search stems Latin words with the English stemmer, whose code language_data.js carries
//    as EnglishStemmer but then names ChineseStemmer, which nothing defines.
window.ChineseStemmer = function () { return new EnglishStemmer(); };
// 3. Sphinx's own catalog of a language may leave a message of its search empty (German: how many pages
//    it found), which then reads in English: the site's catalog has it (site/kimik3_site.py puts its
//    translations in window.KIMIK3_SEARCH_MESSAGES, {English singular: [singular, plural]}).
if (typeof Documentation !== "undefined" && window.KIMIK3_SEARCH_MESSAGES) {
  for (const [message, forms] of Object.entries(window.KIMIK3_SEARCH_MESSAGES)) {
    const own = Documentation.TRANSLATIONS[message];
    if (!own || (Array.isArray(own) && !own.some((form) => form))) Documentation.TRANSLATIONS[message] = forms;
  }
}
