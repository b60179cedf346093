// The rows of an answer as text to take away: CSV (RFC 4180) for the download and TSV
// for pasting into a spreadsheet, with text a spreadsheet would run as a formula
// defused. Pure functions, shared with app.js through window.askdbPage.
(function () {
  "use strict";

  const page = window.askdbPage;
  if (!page) return;

  // A spreadsheet runs a cell that starts with = + - @ (or a tab or carriage return) as
  // a formula; text planted in the data must not, so such text gets a leading '.
  function spreadsheetSafe(text) {
    return /^[=+\-@\t\r]/.test(text) ? "'" + text : text;
  }

  function plainValue(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "number" || typeof value === "boolean") return String(value);
    if (typeof value === "object") return spreadsheetSafe(JSON.stringify(value));
    return spreadsheetSafe(String(value));
  }

  // RFC 4180: fields with a comma, quote, CR or LF (or edge spaces) are quoted, quotes
  // doubled; lines end in CRLF; NULL is an empty field.
  function csvField(text) {
    return /[",\r\n]|^\s|\s$/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }

  function toCsv(columns, rows) {
    const lines = [columns.map((name) => csvField(String(name))).join(",")];
    for (const row of rows) lines.push(row.map((value) => csvField(plainValue(value))).join(","));
    return lines.join("\r\n") + "\r\n";
  }

  // Tab-separated for pasting into a spreadsheet: tabs and line breaks inside a value
  // become spaces (a TSV has no quoting).
  function toTsv(columns, rows) {
    const field = (text) => text.replace(/[\t\r\n]+/g, " ");
    const lines = [columns.map((name) => field(String(name))).join("\t")];
    for (const row of rows) lines.push(row.map((value) => field(plainValue(value))).join("\t"));
    return lines.join("\n") + "\n";
  }

  function fileName(question) {
    const stem = String(question || "result").toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 60);
    return "askdb-" + (stem || "result") + ".csv";
  }

  page.rows = { toCsv, toTsv, fileName };
})();
