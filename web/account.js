// askdb's sign-in on the page (decision 0070). GET /api/session says whether the page
// must sign in; the token typed here is sent once to POST /api/session, which answers
// with an HttpOnly session cookie, so the token is never kept by the page (not in a
// variable, not in storage) and no script can read the cookie. A 401 from any call
// means the session ended (expired, signed out elsewhere, the user revoked): the form
// comes back. With no users the server is open and the page works as it always did.
(function () {
  "use strict";

  const page = window.askdbPage;
  if (!page) return;
  const $ = page.$;

  let required = false; // the server asks for sign-in
  let user = null; // the signed-in user's name

  function showSignIn(message) {
    user = null;
    $("sign-in").hidden = false;
    $("layout").hidden = true;
    $("account").hidden = true;
    $("sign-in-error").hidden = !message;
    $("sign-in-error").textContent = message || "";
    $("sign-in-token").value = "";
    $("sign-in-token").focus();
  }

  function showSignedIn(name) {
    user = name;
    $("sign-in").hidden = true;
    $("layout").hidden = false;
    $("account").hidden = false;
    $("account-user").textContent = "Signed in as " + name;
    page.loadAll();
  }

  async function start() {
    const response = await page.api("GET", "/api/session");
    const body = response.body || {};
    if (!response.ok || body.sign_in !== "required") {
      // Open (no users), or a server without sign-in: the page as it always was.
      page.loadAll();
      return;
    }
    required = true;
    if (body.user) showSignedIn(body.user);
    else showSignIn("");
  }

  // Any call answered 401.
  function needed() {
    required = true;
    if (!$("sign-in").hidden) return;
    page.newConversation();
    showSignIn("Your session has ended; sign in again.");
  }

  async function signIn(event) {
    event.preventDefault();
    const field = $("sign-in-token");
    const token = field.value.trim();
    if (!token) {
      field.focus();
      return;
    }
    $("sign-in-button").disabled = true;
    let response = null;
    let body = {};
    try {
      // Not page.api: its 401 handling is this form's own failure here.
      response = await fetch("/api/session", {
        method: "POST",
        headers: { Accept: "application/json", "Content-Type": "application/json" },
        body: JSON.stringify({ token }),
      });
      body = await response.json().catch(() => ({}));
    } catch (error) {
      body = { detail: "askdb cannot be reached: " + error.message };
    }
    field.value = "";
    $("sign-in-button").disabled = false;
    if (response && response.ok && body.user) {
      showSignedIn(body.user);
      return;
    }
    const why = response && response.status === 401
      ? "That token was not accepted: check it, or ask for a new one (askdb users add)."
      : body.detail || "Signing in failed.";
    $("sign-in-error").hidden = false;
    $("sign-in-error").textContent = why;
    field.focus();
  }

  async function signOut() {
    try {
      await fetch("/api/session", { method: "DELETE", headers: { Accept: "application/json" } });
    } catch (_) {
      // The cookie is cleared by the server; offline, the session ends by its expiry.
    }
    page.newConversation();
    page.forgetRecent();
    showSignIn("");
  }

  page.account = {
    start,
    needed,
    // The signed-in user's name; null when signed out or when sign-in is off.
    user: () => user,
    required: () => required,
  };

  document.addEventListener("DOMContentLoaded", () => {
    $("sign-in-form").addEventListener("submit", signIn);
    $("sign-out").addEventListener("click", signOut);
  });
})();
