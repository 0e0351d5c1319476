// Keyboard shortcuts for the review pages. No page data is read from inline script: everything
// comes from the DOM, so the Content-Security-Policy can forbid inline code entirely.
(function () {
  "use strict";
  const page = document.body.dataset.page;

  function typing(ev) {
    const t = ev.target;
    return t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && (t.type === "text" || t.type === "password")));
  }

  if (page === "queue") {
    document.addEventListener("keydown", function (ev) {
      if (typing(ev) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.key === "Enter" || ev.key === "n") {
        const start = document.getElementById("start");
        if (start) { ev.preventDefault(); start.click(); }
      }
    });
    return;
  }
  if (page !== "item") return;

  const form = document.getElementById("decision");
  const note = document.getElementById("note");
  const claims = Array.from(document.querySelectorAll("li.claim"));
  const modes = Array.from(document.querySelectorAll("input[name=failure_mode]"));
  let active = claims.length ? 0 : -1;
  let sent = false;

  function highlight() {
    claims.forEach(function (c, i) { c.classList.toggle("active", i === active); });
    if (active >= 0) claims[active].scrollIntoView({ block: "nearest" });
  }
  function setVerdict(v) {
    if (active < 0) return;
    const input = claims[active].querySelector("input[value=" + v + "]");
    if (input) input.checked = true;
  }
  function submit() {
    if (sent) return;  // a held-down Enter must not post twice
    sent = true;
    form.submit();
  }
  highlight();

  document.getElementById("confirm").addEventListener("click", function () { form.reset(); submit(); });

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (typing(ev)) {
      if (ev.key === "Escape") { ev.target.blur(); ev.preventDefault(); }
      return;
    }
    const k = ev.key;
    if (k >= "1" && k <= String(modes.length)) { modes[Number(k) - 1].checked = true; ev.preventDefault(); }
    else if (k === "j") { if (active < claims.length - 1) active += 1; highlight(); ev.preventDefault(); }
    else if (k === "k") { if (active > 0) active -= 1; highlight(); ev.preventDefault(); }
    else if (k === "e") { setVerdict("entailed"); ev.preventDefault(); }
    else if (k === "u") { setVerdict("neutral"); ev.preventDefault(); }
    else if (k === "x") { setVerdict("contradicted"); ev.preventDefault(); }
    else if (k === "/") { note.focus(); ev.preventDefault(); }
    else if (k === "c") { form.reset(); submit(); ev.preventDefault(); }
    else if (k === "Enter") {
      // Enter on a focused button or link keeps its own meaning (e.g. the logout button).
      const tag = ev.target && ev.target.tagName;
      if (tag === "BUTTON" || tag === "A") return;
      submit(); ev.preventDefault();
    }
  });
})();
