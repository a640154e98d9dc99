"""The course's maintenance tools, a package run from the repository's root: `python -m tools.<name>`, or
through the Makefile's targets, which do that.

- repo_url: the repository the badges, install lines and README name (`make set-repo`);
- student_edition, nbgrader_export: what a teacher hands out (`make student`, `make nbgrader`);
- notebook_times: each lesson's run time (`make times`);
- site_pages: the website's pages (`make site`);
- translations: the catalogs and the editions in other languages (`make catalogs`, `make edition`,
  `make lesson`), a package of its own.

(A student edition keeps repo_url only.) They import each other as `from tools import ...`: nothing edits
`sys.path`.
"""
