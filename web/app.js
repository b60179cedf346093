// askdb's page: asks the JSON API (/api/ask/stream, /api/sql, /api/schema, /api/eval,
// /api/health) and shows the answers as a conversation's thread (each follow-up sends
// the conversation_id of the answer before it; earlier turns fold away), each step of
// the agent as it happens, and the rows to take away (CSV, TSV, chart, console). The
// sign-in (account.js) and the Correct / Wrong buttons (verify.js) are files of their
// own that reach this one through window.askdbPage, as do the evaluation card
// (evaluation.js) and the rows as CSV and TSV (rows.js). Every value from the server or the user reaches
// the page through textContent or an attribute, never parsed as HTML, so data
// (which may hold text planted in the database) can never become markup.
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);

  // What the other scripts of the page share with this one: they set page.account and
  // page.verify before the page is ready (deferred scripts run in order).
  const page = {};
  window.askdbPage = page;

  // Builds an element: el("td", {class: "num", text: "3", title: "..."}, [children]).
  function el(tag, props, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.className = value;
      else if (key === "on") for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
      else node.setAttribute(key, String(value));
    }
    for (const child of children || []) if (child) node.append(child);
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  const numberFormat = new Intl.NumberFormat(undefined, { maximumFractionDigits: 4 });

  // Money: the currency the schema notes declare (GET /api/schema) and the names of the
  // columns that hold it. A result column is money when its name is one of those, or
  // has one as a whole part (sum_total_amt), or names a money word.
  let moneyFormat = null;
  let moneyNames = [];
  const MONEY_WORDS = ["revenue", "billed", "collected", "outstanding", "dues", "turnover", "amount", "salary", "price"];

  function setCurrency(currency, columns) {
    moneyFormat = null;
    moneyNames = (columns || []).map((name) => String(name).toLowerCase());
    if (!currency) return;
    try {
      moneyFormat = new Intl.NumberFormat(undefined, { style: "currency", currency, maximumFractionDigits: 2 });
    } catch (_) {
      moneyFormat = null; // an unknown code: plain numbers
    }
  }

  function isMoneyColumn(name) {
    if (!moneyFormat) return false;
    const parts = String(name).toLowerCase().split(/[^a-z0-9]+/).filter(Boolean);
    const joined = "_" + parts.join("_") + "_";
    return moneyNames.some((money) => joined.includes("_" + money + "_"))
      || parts.some((part) => MONEY_WORDS.includes(part));
  }

  function formatNumber(value, money) {
    return money && moneyFormat ? moneyFormat.format(value) : numberFormat.format(value);
  }

  // Calls the API; resolves to {status, ok, body} whatever the status, and turns a
  // network failure into the same shape so callers have one path.
  async function api(method, path, payload) {
    const init = { method, headers: { Accept: "application/json" } };
    if (payload !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(payload);
    }
    try {
      const response = await fetch(path, init);
      let body = null;
      try {
        body = await response.json();
      } catch (_) {
        body = { error: "unreadable_response", detail: "the server sent something that is not JSON (HTTP " + response.status + ")" };
      }
      if (response.status === 401 && page.account) page.account.needed();
      return { status: response.status, ok: response.ok, body, headers: response.headers };
    } catch (error) {
      return { status: 0, ok: false, body: { error: "network_error", detail: "askdb cannot be reached: " + error.message } };
    }
  }

  // ---- The result grid: NULL is a grey badge, an empty string an empty cell ----

  function cell(value, money) {
    if (value === null || value === undefined) {
      return el("td", { class: "is-null" }, [el("span", { class: "null", text: "NULL", title: "SQL NULL: no value" })]);
    }
    if (typeof value === "number") {
      return el("td", { class: money ? "num money" : "num", text: formatNumber(value, money), title: String(value) });
    }
    if (typeof value === "boolean") return el("td", { text: value ? "true" : "false" });
    if (typeof value === "object") return el("td", { text: JSON.stringify(value) });
    const text = String(value);
    return el("td", { class: text === "" ? "is-empty" : null, text, title: text.length > 40 ? text : null });
  }

  function renderGrid(target, columns, rows, note) {
    clear(target);
    if (!columns || columns.length === 0) return;
    // A column whose values are all numbers (or NULL) is right-aligned, header included.
    const numeric = columns.map((_, index) => rows.some((row) => typeof row[index] === "number")
      && rows.every((row) => row[index] === null || typeof row[index] === "number"));
    const money = columns.map((name, index) => numeric[index] && isMoneyColumn(name));
    const head = el("tr", {}, columns.map((name, index) => el("th", { scope: "col", class: numeric[index] ? "num" : null, text: name })));
    const body = el("tbody", {}, rows.map((row) => el("tr", {}, row.map((value, index) => cell(value, money[index])))));
    target.append(el("table", {}, [el("thead", {}, [head]), body]));
    if (note) target.after(note);
  }

  function gridNote(rowCount, truncated) {
    const text = rowCount + (rowCount === 1 ? " row" : " rows") + (truncated ? " (the row cap was reached; more rows may exist)" : "");
    return el("p", { class: "grid-note", text });
  }

  // ---- Chart (Chart.js, vendored) ----

  let chart = null;

  // The charts that fit the rows: bar and line need a label column and a numeric one;
  // scatter needs two numeric columns. The server's rule-chosen chart comes first.
  function chartChoices(spec, columns, rows) {
    const choices = [];
    if (!columns || columns.length < 2 || !rows || rows.length === 0) return choices;
    const numeric = columns.map((_, index) => rows.some((row) => typeof row[index] === "number")
      && rows.every((row) => row[index] === null || typeof row[index] === "number"));
    const numericNames = columns.filter((_, index) => numeric[index]);
    let x = spec && spec.x && columns.includes(spec.x) ? spec.x : columns.find((_, index) => !numeric[index]);
    let y = spec && spec.y && spec.y.length > 0 && spec.kind !== "scatter" ? spec.y.filter((name) => columns.includes(name)) : numericNames.filter((name) => name !== x);
    if (!x && numericNames.length >= 2) {
      x = numericNames[0];
      y = numericNames.slice(1);
    }
    if (x && y.length > 0 && rows.length <= 500) {
      choices.push({ kind: "bar", x, y });
      if (rows.length >= 2) choices.push({ kind: "line", x, y });
    }
    if (numericNames.length >= 2 && rows.length >= 2) {
      const sx = spec && spec.kind === "scatter" && spec.x ? spec.x : numericNames[0];
      const sy = spec && spec.kind === "scatter" && spec.y && spec.y.length ? spec.y : [numericNames.find((name) => name !== sx)];
      choices.push({ kind: "scatter", x: sx, y: sy });
    }
    if (spec && spec.kind && spec.kind !== "none") {
      const first = choices.findIndex((choice) => choice.kind === spec.kind);
      if (first > 0) choices.unshift(choices.splice(first, 1)[0]);
    }
    return choices;
  }

  const palette = ["#4338ca", "#0ea5e9", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6"];

  function renderChart(spec, columns, rows) {
    const box = $("chart-box");
    if (chart) {
      chart.destroy();
      chart = null;
    }
    box.hidden = true;
    const config = chartConfig(spec, columns, rows);
    if (!config) return;
    box.hidden = false;
    chart = new window.Chart($("chart"), config);
  }

  // The Chart.js configuration of a chart of the rows; null when none can be drawn.
  function chartConfig(spec, columns, rows) {
    if (!spec || spec.kind === "none" || !spec.x || !spec.y || spec.y.length === 0 || !window.Chart) return null;
    const xIndex = columns.indexOf(spec.x);
    const yIndexes = spec.y.map((name) => columns.indexOf(name)).filter((index) => index >= 0);
    if (xIndex < 0 || yIndexes.length === 0) return null;
    const label = (value) => (value === null || value === undefined ? "NULL" : String(value));
    let config;
    if (spec.kind === "scatter") {
      const y = yIndexes[0];
      config = {
        type: "scatter",
        data: { datasets: [{ label: columns[y], data: rows.map((row) => ({ x: row[xIndex], y: row[y] })), backgroundColor: palette[0] }] },
        options: { scales: { x: { title: { display: true, text: spec.x } }, y: { title: { display: true, text: columns[y] } } } },
      };
    } else {
      config = {
        type: spec.kind === "line" ? "line" : "bar",
        data: {
          labels: rows.map((row) => label(row[xIndex])),
          datasets: yIndexes.map((y, n) => ({
            label: columns[y],
            data: rows.map((row) => (typeof row[y] === "number" ? row[y] : null)),
            backgroundColor: palette[n % palette.length] + (spec.kind === "line" ? "33" : "d0"),
            borderColor: palette[n % palette.length],
            borderWidth: spec.kind === "line" ? 2 : 0,
            borderRadius: 4,
            tension: 0.25,
            fill: false,
          })),
        },
        options: { scales: { y: { beginAtZero: true } } },
      };
    }
    config.options.responsive = true;
    config.options.maintainAspectRatio = false;
    config.options.animation = false;
    config.options.plugins = { legend: { display: yIndexes.length > 1 || spec.kind === "scatter" } };
    return config;
  }

  // ---- Asking ----

  const DECISION_LABELS = { answer: "Answer", clarify: "Needs clarifying", decline: "Declined", give_up: "Gave up", error: "Error" };

  let busy = false;
  let timer = null;

  function setBusy(on) {
    busy = on;
    $("ask-button").disabled = on;
    $("ask-form").setAttribute("aria-busy", on ? "true" : "false");
    $("progress").hidden = !on;
    clearInterval(timer);
    if (on) {
      const started = Date.now();
      const tick = () => {
        const seconds = Math.floor((Date.now() - started) / 1000);
        $("progress-text").textContent = "Working" + (seconds > 0 ? " · " + seconds + " s" : "") + "…";
      };
      tick();
      timer = setInterval(tick, 500);
    }
  }

  function mode() {
    const checked = document.querySelector('input[name="mode"]:checked');
    return checked ? checked.value : "agent";
  }

  // Parses one server-sent event block into {event, data}; null without data.
  function parseEvent(block) {
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue; // a comment: the keep-alive
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (data.length === 0) return null;
    try {
      return { event, data: JSON.parse(data.join("\n")) };
    } catch (_) {
      return null;
    }
  }

  // POST /api/ask/stream: calls onStep for each step as it arrives and resolves to the
  // same {status, ok, body} as api(), the body being the final result or the error.
  // (EventSource cannot POST, so the stream is read with fetch.)
  async function askStream(payload, onStep) {
    let response;
    try {
      response = await fetch("/api/ask/stream", {
        method: "POST",
        headers: { Accept: "text/event-stream", "Content-Type": "application/json" },
        body: JSON.stringify(payload),
      });
    } catch (error) {
      return { status: 0, ok: false, body: { error: "network_error", detail: "askdb cannot be reached: " + error.message } };
    }
    const type = response.headers.get("content-type") || "";
    if (response.status === 401 && page.account) page.account.needed();
    if (!response.ok || !type.startsWith("text/event-stream") || !response.body) {
      let body = null;
      try {
        body = await response.json();
      } catch (_) {
        body = { error: "unreadable_response", detail: "the server sent something that is not JSON (HTTP " + response.status + ")" };
      }
      return { status: response.status, ok: false, body };
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let last = null;
    const take = (block) => {
      const parsed = parseEvent(block);
      if (!parsed) return;
      if (parsed.event === "step") onStep(parsed.data);
      else if (parsed.event === "result") last = { status: 200, ok: true, body: parsed.data };
      else if (parsed.event === "error") last = { status: parsed.data.status || 500, ok: false, body: parsed.data };
    };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          take(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (error) {
      return { status: 0, ok: false, body: { error: "network_error", detail: "the answer stream broke off: " + error.message } };
    }
    if (buffer.trim()) take(buffer);
    return last || { status: 0, ok: false, body: { error: "stream_ended", detail: "the server ended the stream without an answer" } };
  }

  const seconds = (ms) => (Math.floor(ms / 100) / 10).toFixed(1) + " s";

  // One live step: its time since the question, the server's sentence, and the SQL the
  // guard saw. A step that failed is marked, so a repair reads as one.
  function showStep(event) {
    const list = $("steps");
    list.hidden = false;
    const bad = event.step === "failed" || (event.step === "guard" && !event.accepted)
      || (event.step === "executed" && event.rows === null);
    const good = event.step === "finished" && event.decision === "answer";
    const took = typeof event.elapsed_ms === "number" && event.elapsed_ms >= 100 ? " (" + seconds(event.elapsed_ms) + ")" : "";
    const item = el("li", { class: "step step-" + event.step + (bad ? " bad" : "") + (good ? " good" : ""), "data-step": event.step }, [
      el("span", { class: "step-time", text: seconds(event.started_ms || 0) }),
      el("span", { class: "step-text", text: (event.summary || event.step) + took }),
    ]);
    if (event.step === "guard" && event.sql) {
      item.append(el("code", { class: "step-sql", text: event.sql.length > 240 ? event.sql.slice(0, 239) + "…" : event.sql }));
    }
    list.append(item);
  }

  async function ask(question) {
    question = question.trim();
    if (!question || busy) {
      if (!question) $("question").focus();
      return;
    }
    $("question").value = question;
    clear($("steps"));
    $("steps").hidden = true;
    setBusy(true);
    const chosen = mode();
    // A question asked while the local model starts waits for it instead of failing.
    if (!modelConfigured && localModel && (localModel.phase === "ready" || LOCAL_STARTING.includes(localModel.phase))) {
      const waiting = el("li", { class: "step step-waiting", "data-step": "waiting" }, [
        el("span", { class: "step-time", text: "…" }),
        el("span", { class: "step-text" }),
      ]);
      $("steps").hidden = false;
      $("steps").append(waiting);
      await localModelReady((status) => {
        waiting.lastChild.textContent = "Waiting for the local model: " + status.message;
      });
      waiting.remove();
    }
    const payload = { question, mode: chosen };
    if (conversationId) payload.conversation_id = conversationId;
    const response = await askStream(payload, showStep);
    setBusy(false);
    if (response.ok) {
      remember(question, chosen);
      const result = response.body;
      // The turn on show so far becomes an earlier turn of the same conversation.
      if (shownTurn && result.conversation_id === conversationId) foldTurn(shownTurn);
      else clearThread();
      conversationId = result.conversation_id || null;
      shownTurn = result;
      showResult(result);
      showThreadHead();
      return;
    }
    if (response.status === 401) {
      showError(question, response);
      return;
    }
    if (response.status === 404 && response.body && response.body.error === "unknown_conversation") {
      // The server's sentence says why; the next question starts a new conversation.
      newConversation();
      showError(question, response);
      $("thread-notice").hidden = false;
      $("thread-notice").textContent = "That conversation has ended, so the question was not asked. Your next question starts a new conversation: ask it in full.";
      return;
    }
    // The answer on show stays in the thread above the error.
    if (shownTurn) foldTurn(shownTurn);
    shownTurn = null;
    showError(question, response);
  }

  // ---- The conversation's thread: earlier turns, folded; the latest in #result ----

  let conversationId = null; // sent with the next question to make it a follow-up
  let shownTurn = null; // the result shown in #result, a turn of that conversation

  function clearThread() {
    for (const canvas of $("thread").querySelectorAll("canvas")) {
      const drawn = window.Chart && window.Chart.getChart(canvas);
      if (drawn) drawn.destroy();
    }
    clear($("thread"));
    $("thread").hidden = true;
    $("thread-notice").hidden = true;
  }

  function showThreadHead() {
    const turns = shownTurn && shownTurn.turn ? shownTurn.turn : 0;
    $("thread-head").hidden = !conversationId;
    $("thread-label").textContent = turns > 1 ? "A conversation of " + turns + " questions; follow-ups continue it." : "Follow-up questions continue this conversation.";
    $("turn-label").hidden = !(shownTurn && shownTurn.turn);
    $("turn-label").textContent = shownTurn && shownTurn.turn ? "Question " + shownTurn.turn : "";
  }

  // "New conversation": forgets the thread; the next question is asked on its own.
  function newConversation() {
    conversationId = null;
    shownTurn = null;
    clearThread();
    resetResult();
    $("result").hidden = true;
    $("thread-head").hidden = true;
    $("turn-label").hidden = true;
    $("question").focus();
  }

  // An earlier turn: its question, how it was understood, its answer, SQL, chart and
  // rows, folded (the chart is drawn when the turn is opened).
  function foldTurn(result) {
    const body = el("div", { class: "turn-body" }, [
      result.understood_as ? el("p", { class: "understood", text: "Understood as: " + result.understood_as }) : null,
      el("p", { class: "answer", text: answerText(result) }),
      result.sql ? el("pre", {}, [el("code", { text: result.sql })]) : null,
    ]);
    let canvas = null;
    if (result.decision === "answer") {
      const choices = chartChoices(result.chart, result.columns, result.rows);
      const spec = result.chart && result.chart.kind !== "none" && choices.find((choice) => choice.kind === result.chart.kind);
      if (spec) {
        canvas = el("canvas", { role: "img", "aria-label": "Chart of turn " + result.turn });
        body.append(el("div", { class: "chart-box" }, [canvas]));
        canvas.dataset.spec = JSON.stringify(spec);
      }
      const grid = el("div", { class: "grid" });
      body.append(grid);
      renderGrid(grid, result.columns, result.rows, gridNote(result.row_count, result.truncated));
    }
    const details = el("details", { class: "turn" }, [
      el("summary", {}, [
        el("span", { class: "turn-label", text: "Question " + (result.turn || "") }),
        el("span", { class: "badge " + result.decision, text: DECISION_LABELS[result.decision] || result.decision }),
        el("span", { class: "result-question", text: result.question }),
      ]),
      body,
    ]);
    details.addEventListener("toggle", () => {
      if (!details.open || !canvas || (window.Chart && window.Chart.getChart(canvas))) return;
      const config = chartConfig(JSON.parse(canvas.dataset.spec), result.columns, result.rows);
      if (config) new window.Chart(canvas, config);
    });
    $("thread").append(el("li", { "data-turn": result.turn }, [details]));
    $("thread").hidden = false;
  }

  // ---- Recent questions (this browser only: localStorage) ----

  const RECENT_KEY = "askdb.recent";
  const RECENT_MAX = 10;

  function recentQuestions() {
    try {
      const stored = JSON.parse(window.localStorage.getItem(RECENT_KEY) || "[]");
      return Array.isArray(stored) ? stored.filter((item) => item && typeof item.question === "string") : [];
    } catch (_) {
      return [];
    }
  }

  function remember(question, chosenMode) {
    const kept = recentQuestions().filter((item) => item.question !== question);
    kept.unshift({ question, mode: chosenMode, at: new Date().toISOString() });
    try {
      window.localStorage.setItem(RECENT_KEY, JSON.stringify(kept.slice(0, RECENT_MAX)));
    } catch (_) {
      // Storage full or switched off: the list is a convenience.
    }
    renderRecent();
  }

  // Also on sign-out: the next person at this browser does not see these questions.
  function forgetRecent() {
    try {
      window.localStorage.removeItem(RECENT_KEY);
    } catch (_) {
      // nothing stored
    }
    renderRecent();
  }

  function renderRecent() {
    const items = recentQuestions();
    const list = $("recent-list");
    clear(list);
    $("recent").hidden = items.length === 0;
    for (const item of items) {
      list.append(el("button", {
        type: "button", class: "chip recent-question", text: item.question, title: "Ask again (" + (item.mode || "agent") + ")",
        on: { click: () => {
          const radio = document.querySelector('input[name="mode"][value="' + (item.mode === "baseline" ? "baseline" : "agent") + '"]');
          if (radio) radio.checked = true;
          // Asked again on its own, not as a follow-up of what is on show.
          newConversation();
          ask(item.question);
        } },
      }));
    }
  }

  function resetResult() {
    $("result").hidden = false;
    for (const id of ["warnings", "unverified", "clarify", "assumptions-box", "sql-box", "attempts-box", "chart-box", "result-tools", "understood", "thread-notice"]) $(id).hidden = true;
    if (page.verify) page.verify.hide();
    currentResult = null;
    $("answer").className = "answer";
    clear($("grid"));
    document.querySelectorAll("#result .grid-note").forEach((node) => node.remove());
    $("result-meta").textContent = "";
    if (chart) {
      chart.destroy();
      chart = null;
    }
  }

  function showError(question, response) {
    resetResult();
    $("turn-label").hidden = true;
    const body = response.body || {};
    const decision = $("decision");
    decision.className = "badge error";
    decision.textContent = response.status ? "Error " + response.status : "Error";
    $("result-question").textContent = question;
    $("answer").className = "answer error-text";
    $("answer").textContent = body.detail || body.error || "the request failed";
    if (body.error === "model_not_configured") showBanner(body.detail);
  }

  let currentResult = null;

  // The answer in one sentence: the explanation, a single value, the row count, or why
  // there is no answer (a declined question's reason: a restricted column, a write...).
  function answerText(result) {
    if (result.decision === "answer") {
      const only = result.rows.length > 0 ? result.rows[0][0] : null;
      return result.explanation || (result.row_count === 1 && result.columns.length === 1
        ? result.columns[0] + ": " + (only === null ? "NULL" : typeof only === "number" ? formatNumber(only, isMoneyColumn(result.columns[0])) : String(only))
        : result.row_count + (result.row_count === 1 ? " row" : " rows") + " below.");
    }
    if (result.decision === "clarify") return "The question can be read more than one way.";
    return result.reason || "askdb could not answer this question.";
  }

  function showResult(result) {
    resetResult();
    const decision = $("decision");
    decision.className = "badge " + result.decision;
    decision.textContent = DECISION_LABELS[result.decision] || result.decision;
    $("result-question").textContent = result.question;
    // A follow-up says how it was read as one standalone question.
    if (result.understood_as) {
      $("understood").hidden = false;
      $("understood").textContent = "Understood as: " + result.understood_as;
    }
    $("answer").textContent = answerText(result);

    // Checks of the result against the question that still fail: the answer is shown,
    // but never as a plain one.
    if (result.decision === "answer" && result.warnings && result.warnings.length > 0) {
      decision.className = "badge suspect";
      decision.textContent = "Answer, flagged";
      $("warnings").hidden = false;
      const list = $("warning-list");
      clear(list);
      for (const warning of result.warnings) {
        list.append(el("li", {}, [
          document.createTextNode(warning.message + " "),
          el("span", { class: "check-id", text: "(" + warning.check + ")" }),
        ]));
      }
    }

    if (result.unverified_numbers && result.unverified_numbers.length > 0) {
      $("unverified").hidden = false;
      $("unverified").textContent = "Not found in the rows, so not confirmed: " + result.unverified_numbers.join(", ");
    }

    if (result.clarify) {
      $("clarify").hidden = false;
      $("clarify-question").textContent = result.clarify.question;
      const options = $("clarify-options");
      clear(options);
      for (const option of result.clarify.options || []) {
        // Clicking an option asks the question again with the choice spelled out.
        options.append(el("button", { type: "button", class: "chip", text: option, on: { click: () => ask(result.question + " (" + option + ")") } }));
      }
    }

    // Each assumption once (the server already says each once; this keeps it so for a
    // result from an older server).
    const assumptions = [];
    const said = new Set();
    for (const assumption of result.assumptions || []) {
      const key = String(assumption).trim().replace(/\s+/g, " ").replace(/[.;,]+$/, "").toLowerCase();
      if (key && !said.has(key)) {
        said.add(key);
        assumptions.push(assumption);
      }
    }
    if (assumptions.length > 0) {
      $("assumptions-box").hidden = false;
      const list = $("assumptions");
      clear(list);
      for (const assumption of assumptions) list.append(el("li", { text: assumption }));
    }

    if (result.sql) {
      $("sql-box").hidden = false;
      $("sql").textContent = result.sql;
    }

    const history = result.history || [];
    if (history.length > 0) {
      $("attempts-box").hidden = false;
      $("attempts-title").textContent = "Failed attempts (" + history.length + ")";
      const list = $("attempts");
      clear(list);
      history.forEach((attempt, index) => {
        list.append(el("details", { class: "attempt" }, [
          el("summary", {}, [
            el("span", { text: "Attempt " + (index + 1) }),
            el("span", { class: "error-type", text: attempt.error_type }),
          ]),
          el("div", { class: "attempt-body" }, [
            el("p", { text: attempt.message }),
            el("pre", {}, [el("code", { text: attempt.sql })]),
          ]),
        ]));
      });
    }

    if (result.decision === "answer") {
      currentResult = result;
      const choices = chartChoices(result.chart, result.columns, result.rows);
      const select = $("chart-kind");
      clear(select);
      select.append(el("option", { value: "none", text: "Table only" }));
      for (const choice of choices) select.append(el("option", { value: choice.kind, text: CHART_LABELS[choice.kind] || choice.kind }));
      const initial = result.chart && result.chart.kind !== "none" && choices.find((choice) => choice.kind === result.chart.kind);
      select.value = initial ? initial.kind : "none";
      select.disabled = choices.length === 0;
      $("result-tools").hidden = result.columns.length === 0;
      if (initial) renderChart(initial, result.columns, result.rows);
      renderGrid($("grid"), result.columns, result.rows, gridNote(result.row_count, result.truncated));
    }

    const meta = [
      result.mode,
      result.attempts + (result.attempts === 1 ? " attempt" : " attempts"),
      (result.latency_ms / 1000).toFixed(1) + " s",
      (result.tokens.input + result.tokens.output).toLocaleString() + " tokens",
      "$" + Number(result.cost_usd).toFixed(4),
    ];
    if (result.tables_used && result.tables_used.length > 0) meta.push("tables: " + result.tables_used.join(", "));
    // The trace id, to look the question up in the trace backend (Phoenix, Langfuse).
    if (result.trace_id) meta.push("trace " + result.trace_id);
    $("result-meta").textContent = meta.join(" · ");
    if (page.verify) page.verify.show(result);
  }

  const CHART_LABELS = { bar: "Bar chart", line: "Line chart", scatter: "Scatter plot" };

  // ---- Taking the rows away: CSV, TSV ----

  function downloadCsv() {
    if (!currentResult) return;
    const blob = new Blob([page.rows.toCsv(currentResult.columns, currentResult.rows)], { type: "text/csv;charset=utf-8" });
    const link = el("a", { href: URL.createObjectURL(blob), download: page.rows.fileName(currentResult.question) });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  }

  async function flash(button, done, label) {
    button.textContent = done ? "Copied" : "Select and copy";
    setTimeout(() => { button.textContent = label; }, 1500);
  }

  // ---- Copy ----

  async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (_) {
      // Plain http on another host is not a secure context: fall back to a selection.
      const area = el("textarea", { "aria-hidden": "true" });
      area.value = text;
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.append(area);
      area.select();
      let done = false;
      try {
        done = document.execCommand("copy");
      } catch (_) {
        done = false;
      }
      area.remove();
      return done;
    }
  }

  // ---- SQL console ----

  async function runConsole() {
    const sql = $("console-sql").value.trim();
    const target = $("console-result");
    if (!sql) {
      $("console-sql").focus();
      return;
    }
    $("console-run").disabled = true;
    clear(target);
    target.append(el("p", { class: "muted", text: "Running…" }));
    const response = await api("POST", "/api/sql", { sql });
    $("console-run").disabled = false;
    clear(target);
    const body = response.body || {};
    if (page.verify) page.verify.consoleRan(sql, response.ok && body.ok);
    if (!response.ok) {
      target.append(el("div", { class: "error-box", text: body.detail || body.error || "the request failed" }));
      return;
    }
    if (body.ok) {
      const grid = el("div", { class: "grid" });
      target.append(grid);
      renderGrid(grid, body.columns, body.rows, gridNote(body.row_count, body.truncated));
      target.append(el("p", { class: "grid-note" }, [el("span", { text: "Ran: " }), el("code", { text: body.sql })]));
    } else {
      const parts = [el("span", { class: "error-type", text: body.error_type }), el("span", { text: body.message })];
      if (body.hint) parts.push(el("div", { class: "muted", text: "Hint: " + body.hint }));
      target.append(el("div", { class: "error-box" }, parts));
    }
  }

  // ---- Schema browser ----

  let schemaTables = [];

  function columnList(table) {
    const keys = new Set(table.primary_key || []);
    return el("ul", { class: "columns" }, table.columns.map((column) => el("li", {}, [
      el("span", { class: "col-name" + (keys.has(column.name) ? " key" : ""), text: column.name, title: keys.has(column.name) ? "primary key" : null }),
      el("span", { class: "col-type", text: (column.data_type || "") + (column.nullable ? "" : " not null") }),
      column.description ? el("span", { class: "col-desc", text: column.description }) : null,
    ])));
  }

  function previewSql(table) {
    const quote = (name) => '"' + name.replace(/"/g, '""') + '"';
    return "SELECT " + table.columns.map((column) => quote(column.name)).join(", ") + " FROM " + quote(table.name) + " LIMIT 20";
  }

  function renderSchema() {
    const list = $("schema-list");
    const filter = $("schema-filter").value.trim().toLowerCase();
    clear(list);
    const shown = schemaTables.filter((table) => !filter
      || table.name.toLowerCase().includes(filter)
      || table.columns.some((column) => column.name.toLowerCase().includes(filter)));
    for (const table of shown) {
      const rows = table.row_count === null || table.row_count === undefined ? "" : table.row_count.toLocaleString() + " rows";
      const details = el("details", {}, [
        el("summary", { title: table.description || null }, [el("span", { class: "table-name", text: table.name }), el("span", { class: "rows", text: rows })]),
        el("div", { class: "table-body" }, [
          table.description ? el("p", { class: "table-desc", text: table.description }) : null,
          columnList(table),
          el("button", {
            type: "button", class: "ghost small", text: "Preview rows",
            on: { click: () => { $("console-sql").value = previewSql(table); runConsole(); } },
          }),
        ]),
      ]);
      if (filter) details.open = true;
      list.append(details);
    }
    if (shown.length === 0) list.append(el("p", { class: "muted", text: "No table or column matches." }));
  }

  async function loadSchema() {
    const response = await api("GET", "/api/schema");
    if (!response.ok) {
      clear($("schema-list"));
      $("schema-list").append(el("div", { class: "error-box", text: (response.body && response.body.detail) || "the schema could not be loaded" }));
      return;
    }
    schemaTables = response.body.tables || [];
    setCurrency(response.body.currency, response.body.money_columns);
    $("schema-count").textContent = schemaTables.length + " tables · " + response.body.dialect;
    renderSchema();
  }

  // ---- Health ----

  function pill(text, state, title) {
    return el("span", { class: "pill " + state, text, title });
  }

  function openInConsole(sql) {
    $("console-sql").value = sql;
    $("console-sql").scrollIntoView({ block: "center" });
    $("console-sql").focus();
  }

  function showBanner(text) {
    $("banner").hidden = false;
    $("banner-text").textContent = text;
  }

  // ---- The local model (offered when no model is configured) ----

  let localModel = null; // the last GET /api/local-model status
  let localModelFollowing = false;
  let modelConfigured = false; // questions can be answered (from /api/health)
  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  const LOCAL_STARTING = ["starting", "installing", "downloading", "verifying", "loading"];

  function showLocalModel(status) {
    localModel = status;
    const box = $("local-model");
    box.hidden = false;
    const starting = LOCAL_STARTING.includes(status.phase);
    $("local-model-start").hidden = starting || status.phase === "ready";
    $("local-model-start").textContent = status.phase === "failed" || status.phase === "exited" ? "Start the local model again" : "Start the local model";
    const bar = $("local-model-bar");
    if (status.phase === "downloading" && status.total_bytes) {
      bar.hidden = false;
      bar.max = status.total_bytes;
      bar.value = status.downloaded_bytes || 0;
    } else {
      bar.hidden = true;
    }
    $("local-model-text").textContent = status.phase === "not_started" ? "Qwen2.5-Coder-1.5B on this machine, no key: a one-time download of about 1.1 GB." : status.message;
    if (starting) $("banner-title").textContent = "Starting the local model.";
  }

  // Follows the start until the model answers (then questions work) or fails.
  async function followLocalModel() {
    if (localModelFollowing) return;
    localModelFollowing = true;
    try {
      for (;;) {
        const response = await api("GET", "/api/local-model");
        if (!response.ok || !response.body) break;
        showLocalModel(response.body);
        if (response.body.phase === "ready") {
          // The server installs the model right after it answers: health says when.
          const health = await api("GET", "/api/health");
          if (health.body && health.body.model_configured) {
            modelConfigured = true;
            $("banner").hidden = true;
            loadHealth();
            break;
          }
        } else if (!LOCAL_STARTING.includes(response.body.phase)) {
          $("banner-title").textContent = "Questions are unavailable.";
          break;
        }
        await pause(1000);
      }
    } finally {
      localModelFollowing = false;
    }
  }

  async function startLocalModel() {
    const response = await api("POST", "/api/local-model/start");
    if (response.body && response.body.phase) showLocalModel(response.body);
    followLocalModel();
  }

  // Resolves once a model answers questions; false when the local model cannot start.
  async function localModelReady(onWait) {
    for (;;) {
      if (modelConfigured) return true;
      const response = await api("GET", "/api/local-model");
      const status = response.body;
      if (!response.ok || !status) return false;
      if (status.phase === "ready") {
        const health = await api("GET", "/api/health");
        if (health.body && health.body.model_configured) {
          modelConfigured = true;
          return true;
        }
      } else if (!LOCAL_STARTING.includes(status.phase)) return false;
      onWait(status);
      await pause(1000);
    }
  }

  async function loadHealth() {
    const response = await api("GET", "/api/health");
    const body = response.body || {};
    const status = $("status");
    clear(status);
    if (typeof body.ok !== "boolean") {
      status.append(pill("health unknown", "bad", body.detail || ""));
      return;
    }
    const details = body.details || {};
    status.append(pill(body.database + " · " + body.tables + " tables" + (body.database_reachable ? "" : " (unreachable)"), body.database_reachable ? "good" : "bad", details.database));
    status.append(pill(body.read_only_confirmed ? "read-only, checked" : "read-only NOT confirmed", body.read_only_confirmed ? "good" : "bad", details.read_only));
    modelConfigured = body.model_configured;
    if (!body.model_configured) {
      status.append(pill(body.local_model && LOCAL_STARTING.includes(body.local_model.phase) ? "local model starting" : "no model", "bad", details.model));
      showBanner(body.local_model && LOCAL_STARTING.includes(body.local_model.phase) ? "" : details.model || "");
      if (body.local_model) {
        showLocalModel(body.local_model);
        if (LOCAL_STARTING.includes(body.local_model.phase) || body.local_model.phase === "ready") followLocalModel();
      }
    } else {
      status.append(pill("model " + body.model + (body.model_reachable ? "" : " (check failed)"), body.model_reachable ? "good" : "bad", details.model));
    }
  }

  // ---- Wiring ----

  // What needs the API: called once signed in (at once when sign-in is off).
  function loadAll() {
    loadSchema();
    loadHealth();
    if (page.evaluation) page.evaluation.load();
    if (page.verify) page.verify.load();
    $("question").focus();
  }

  Object.assign(page, { $, el, clear, api, numberFormat, openInConsole, loadAll, newConversation, forgetRecent });

  document.addEventListener("DOMContentLoaded", () => {
    $("new-conversation").addEventListener("click", newConversation);
    $("ask-form").addEventListener("submit", (event) => {
      event.preventDefault();
      ask($("question").value);
    });
    $("question").addEventListener("keydown", (event) => {
      // Enter asks (Ctrl/Cmd+Enter too); Shift+Enter is a new line; IME composition is left alone.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        ask($("question").value);
      }
    });
    $("console-sql").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        runConsole();
      }
    });
    $("console-run").addEventListener("click", runConsole);
    $("local-model-start").addEventListener("click", startLocalModel);
    $("schema-filter").addEventListener("input", renderSchema);
    $("copy-sql").addEventListener("click", async () => {
      const done = await copyText($("sql").textContent);
      $("copy-sql").textContent = done ? "Copied" : "Select and copy";
      setTimeout(() => { $("copy-sql").textContent = "Copy"; }, 1500);
    });
    $("edit-sql").addEventListener("click", () => openInConsole($("sql").textContent));
    $("download-csv").addEventListener("click", downloadCsv);
    $("copy-tsv").addEventListener("click", async () => {
      if (!currentResult) return;
      flash($("copy-tsv"), await copyText(page.rows.toTsv(currentResult.columns, currentResult.rows)), "Copy as TSV");
    });
    $("chart-kind").addEventListener("change", () => {
      if (!currentResult) return;
      const choice = chartChoices(currentResult.chart, currentResult.columns, currentResult.rows).find((item) => item.kind === $("chart-kind").value);
      renderChart(choice || { kind: "none" }, currentResult.columns, currentResult.rows);
    });
    $("recent-clear").addEventListener("click", forgetRecent);
    renderRecent();
    // account.js says whether the page must sign in first.
    if (page.account) page.account.start();
    else loadAll();
  });
})();
