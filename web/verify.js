// The Correct and Wrong buttons under an answer (verified examples, issue 35). Only a
// person's click saves an example: "Correct" sends the question (a follow-up as the
// standalone question it was understood as) and the SQL that ran to
// POST /api/examples; "Wrong" records that the answer is wrong, with the verified
// examples it used (POST /api/answers/wrong, so `askdb examples list --caused-wrong` can
// find a bad example; nothing is saved), and opens the SQL in the console; once a
// corrected query runs there, "Save as the answer to this question" sends that one. The example names
// who confirmed it: the signed-in user, or (with no users) the name typed beside the
// buttons, kept in this browser. A refusal (a restricted column, a hidden table, a
// write) is shown in the server's words. Without an example store the buttons stay
// hidden.
(function () {
  "use strict";

  const page = window.askdbPage;
  if (!page) return;
  const $ = page.$;
  const NAME_KEY = "askdb.verifier";

  let examplesOn = false; // GET /api/examples answers: this server keeps examples
  let shown = null; // {question, sql, examples, marked} of the answer on show
  let correcting = null; // the question whose answer is being corrected in the console
  let corrected = null; // the SQL of the console's last successful run while correcting

  function say(id, state, text) {
    const node = $(id);
    node.className = "verify-status" + (state ? " " + state : "");
    node.textContent = text;
  }

  async function load() {
    const response = await page.api("GET", "/api/examples");
    examplesOn = response.ok;
  }

  function storedName() {
    try {
      return window.localStorage.getItem(NAME_KEY) || "";
    } catch (_) {
      return "";
    }
  }

  // Who confirms: the signed-in user, else the name typed; "" when none is known.
  function verifier() {
    const user = page.account && page.account.user();
    if (user) return user;
    const typed = $("verifier-name").value.trim();
    if (typed) {
      try {
        window.localStorage.setItem(NAME_KEY, typed);
      } catch (_) {
        // Storage off: the name is typed again next time.
      }
    }
    return typed;
  }

  function show(result) {
    hide();
    if (!examplesOn || result.decision !== "answer" || !result.sql) return;
    // A follow-up ("and in 2026?") is saved as the standalone question it was
    // understood as: the example must make sense without the conversation.
    shown = {
      question: result.understood_as || result.question,
      sql: result.sql,
      // The verified examples this answer used: what a Wrong blames.
      examples: (result.examples || []).map((example) => example.id),
      marked: false,
    };
    $("verify").hidden = false;
    const signedIn = Boolean(page.account && page.account.user());
    $("verifier-box").hidden = signedIn;
    if (!signedIn && !$("verifier-name").value) $("verifier-name").value = storedName();
  }

  function hide() {
    $("verify").hidden = true;
    say("verify-status", "", "");
    shown = null;
  }

  async function save(question, sql, statusId) {
    const by = verifier();
    if (!by) {
      $("verifier-box").hidden = false;
      $("verifier-name").focus();
      say(statusId, "bad", "Type your name beside Correct and Wrong first: an example records who confirmed it.");
      return false;
    }
    say(statusId, "", "Saving…");
    const response = await page.api("POST", "/api/examples", { question, sql, verified_by: by });
    const body = response.body || {};
    if (response.ok) {
      const id = body.example && body.example.id;
      say(statusId, "good", "Saved as a verified example" + (id ? " (#" + id + ")" : "") + ", confirmed by " + by + ": askdb uses it for questions like this one.");
      return true;
    }
    say(statusId, "bad", "Not saved: " + (body.detail || body.error || "the request failed"));
    return false;
  }

  // Records once that the answer on show is wrong, in the name of the person clicking.
  async function recordWrong(answer) {
    if (answer.marked) return;
    const fix = " Correct the SQL in the console and run it.";
    const by = verifier();
    if (!by) {
      $("verifier-box").hidden = false;
      say("verify-status", "bad", "Type your name beside Correct and Wrong and click Wrong again to record that this answer is wrong." + fix);
      return;
    }
    answer.marked = true;
    const response = await page.api("POST", "/api/answers/wrong", {
      question: answer.question,
      sql: answer.sql,
      examples: answer.examples,
      marked_by: by,
    });
    const body = response.body || {};
    if (shown !== answer) return; // another answer is on show now
    if (!response.ok) {
      answer.marked = false;
      say("verify-status", "bad", "Not recorded as wrong: " + (body.detail || body.error || "the request failed") + "." + fix);
      return;
    }
    const used = answer.examples.length
      ? ", with the verified example" + (answer.examples.length > 1 ? "s" : "") + " it used (#" + answer.examples.join(", #") + ")"
      : "";
    say("verify-status", "", "Recorded as wrong by " + by + used + "." + fix);
  }

  function markWrong() {
    if (!shown) return;
    correcting = shown.question;
    corrected = null;
    page.openInConsole(shown.sql);
    $("correction").hidden = false;
    $("correction-text").textContent = "Correcting the answer to \u201c" + correcting + "\u201d: edit the SQL, run it, then save it.";
    $("save-correction").hidden = true;
    say("correction-status", "", "");
    say("verify-status", "", "Correct the SQL in the console and run it.");
    recordWrong(shown);
  }

  // The console ran `sql` (ok: it returned rows): while correcting, that query may be saved.
  function consoleRan(sql, ok) {
    if (!correcting) return;
    corrected = ok ? sql : null;
    $("save-correction").hidden = !ok;
    say("correction-status", "", ok ? "" : "This query did not run; correct it and run it again.");
  }

  async function saveCorrection() {
    if (!correcting || !corrected) return;
    const done = await save(correcting, corrected, "correction-status");
    if (done) {
      $("save-correction").hidden = true;
      correcting = null;
      corrected = null;
    }
  }

  page.verify = { load, show, hide, consoleRan };

  document.addEventListener("DOMContentLoaded", () => {
    $("mark-correct").addEventListener("click", () => {
      if (shown) save(shown.question, shown.sql, "verify-status");
    });
    $("mark-wrong").addEventListener("click", markWrong);
    $("save-correction").addEventListener("click", saveCorrection);
  });
})();
