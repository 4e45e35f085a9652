"""What the site's owner sees: readers' feedback, the question log, the report and
``anchored eval``. Imports ``answer`` and the stages below it."""
