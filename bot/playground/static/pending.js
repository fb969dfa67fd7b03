// The playground's "Pending asks" panel: every ask the bot has not ended yet, wherever it came from (this
// page, slack-ask ask, any agent), with a live countdown to its deadline, who may answer, and a Withdraw
// button that sends the agent's cancel envelope. Untrusted text only reaches the page as text nodes.
"use strict";

(() => {
  const PENDING_MS = 1000;
  const NAMES_MS = 5000;

  const P = { asks: [], offsetMs: 0, key: "", names: { users: {}, groups: {}, channels: {} }, busy: new Set() };

  const $ = (id) => document.getElementById(id);

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
      else if (key === "class") el.className = value;
      else if (key === "disabled") el.disabled = Boolean(value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  async function api(path, body) {
    const init = body === undefined
      ? { method: "GET", cache: "no-store" }
      : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
    const response = await fetch(path, init);
    try {
      return await response.json();
    } catch (_) {
      return { ok: false, error: `HTTP ${response.status}` };
    }
  }

  function toast(text, kind) {
    const root = $("toasts");
    if (!root) return;
    const note = h("div", { class: `toast ${kind || ""}` }, text);
    root.appendChild(note);
    setTimeout(() => note.remove(), 6000);
  }

  // ------------------------------------------------------------------ names from the workspace

  async function loadNames() {
    try {
      const state = await api("/ui/state");
      if (state && state.users) {
        P.names = {
          users: Object.fromEntries(state.users.map((u) => [u.id, u.name])),
          groups: Object.fromEntries((state.usergroups || []).map((g) => [g.id, `@${g.handle}`])),
          channels: Object.fromEntries((state.channels || []).map((c) => [c.id, c.is_im ? "a DM" : `#${c.name}`])),
        };
        P.key = "";  // names changed: draw again
        render();
      }
    } catch (_) {
      // The main script's connection indicator says when the server is gone.
    }
    setTimeout(loadNames, NAMES_MS);
  }

  function routeText(text) {
    // "#C0DEPLOY", "@U0BOB", "policy:x -> #C0..." as the bot writes them, with names where the page knows them.
    return String(text || "").replace(/([#@])([CGDUW][A-Z0-9]+)/g, (whole, sigil, id) =>
      sigil === "#" ? (P.names.channels[id] || whole) : (P.names.users[id] ? `DM to ${P.names.users[id]}` : whole));
  }

  function whoMayAnswer(responders) {
    if (!responders) return null;
    const names = [
      ...responders.users.map((id) => P.names.users[id] || id),
      ...responders.usergroups.map((id) => P.names.groups[id] || id),
    ];
    return `Only ${names.join(", ")} may answer`;
  }

  // ------------------------------------------------------------------ countdown

  function nowMs() {
    return Date.now() + P.offsetMs;  // the Redis server's clock, which deadlines are measured by
  }

  function left(ms) {
    const s = Math.max(0, Math.ceil(ms / 1000));
    const d = Math.floor(s / 86400);
    const hh = Math.floor((s % 86400) / 3600);
    const mm = Math.floor((s % 3600) / 60);
    const ss = s % 60;
    if (d) return `${d}d ${hh}h`;
    if (hh) return `${hh}h ${String(mm).padStart(2, "0")}m`;
    if (mm) return `${mm}m ${String(ss).padStart(2, "0")}s`;
    return `${ss}s`;
  }

  function countdownText(ask) {
    if (!ask.deadline_ms) return "no deadline";
    const remaining = ask.deadline_ms - nowMs();
    if (remaining <= 0) return "deadline passed: ending…";
    return `${left(remaining)} left`;
  }

  function tick() {
    for (const node of document.querySelectorAll("#pending .countdown")) {
      const ask = P.asks.find((a) => a.ask_id === node.dataset.askId);
      if (!ask) continue;
      const text = countdownText(ask);
      if (node.textContent !== text) node.textContent = text;
      const soon = ask.deadline_ms && ask.deadline_ms - nowMs() < 60000;
      node.classList.toggle("soon", Boolean(soon));
    }
  }

  // ------------------------------------------------------------------ the list

  const ON_TIMEOUT = { cancel: "cancel", recommended: "use the recommended option", error: "end with an error" };

  function render() {
    const list = $("pending");
    if (!list) return;
    const key = JSON.stringify([P.asks, [...P.busy]]);
    if (key === P.key) return;
    P.key = key;
    $("pending-empty").hidden = P.asks.length > 0;
    annotate();
    list.replaceChildren(...P.asks.map((ask) => {
      const who = whoMayAnswer(ask.responders);
      const busy = P.busy.has(ask.ask_id);
      return h("li", { class: "pending-ask", "data-ask-id": ask.ask_id },
        h("div", { class: "pending-head" },
          h("code", { class: "pending-id" }, ask.ask_id),
          h("span", { class: "countdown", "data-ask-id": ask.ask_id, role: "timer", "aria-live": "off" }, countdownText(ask))),
        h("p", { class: "pending-question" }, ask.question || "(no question text)",
          ask.questions > 1 ? h("span", { class: "pending-more" }, ` and ${ask.questions - 1} more`) : null),
        h("p", { class: "pending-meta" },
          `${ask.state === "accepted" ? "Being posted to" : "Posted to"} ${routeText(ask.route)}`,
          ask.deadline_ms ? ` · at the deadline: ${ON_TIMEOUT[ask.on_timeout] || ask.on_timeout}` : "",
          ask.approval ? ` · ${ask.approval} people must agree` : ""),
        who ? h("p", { class: "pending-who" }, who) : null,
        h("button", {
          type: "button",
          class: "btn small pending-withdraw",
          disabled: busy,
          "aria-label": `Withdraw ${ask.ask_id}`,
          onclick: () => withdraw(ask),
        }, busy ? "Withdrawing…" : "Withdraw"));
    }));
    tick();
  }

  async function withdraw(ask) {
    P.busy.add(ask.ask_id);
    render();
    let data;
    try {
      data = await api("/ui/withdraw", { ask_id: ask.ask_id });
    } catch (err) {
      data = { ok: false, error: `The playground server did not answer: ${err}` };
    }
    if (data.ok) {
      toast(`Sent the agent's cancel for ${ask.ask_id}; its cancelled result goes to ${data.reply_to}.`);
    } else {
      P.busy.delete(ask.ask_id);
      toast(data.error || "The ask was not withdrawn", "error");
      render();
    }
  }

  async function poll() {
    try {
      const data = await api("/ui/pending");
      if (Array.isArray(data.asks)) {
        if (typeof data.now_ms === "number") P.offsetMs = data.now_ms - Date.now();
        P.asks = data.asks;
        const ids = new Set(P.asks.map((a) => a.ask_id));
        for (const id of [...P.busy]) if (!ids.has(id)) P.busy.delete(id);
        render();
      }
    } catch (_) {
      // As above: the connection indicator reports it.
    }
    setTimeout(poll, PENDING_MS);
  }

  // ------------------------------------------------------------------ who may answer, on the messages

  // Slack shows nobody who may answer a restricted ask; the playground does, under each of its messages.
  // The conversation is drawn by app.js, which replaces its nodes at will: note them again when it does.
  function annotate() {
    const restricted = new Map();
    for (const ask of P.asks) {
      const who = whoMayAnswer(ask.responders);
      if (who) for (const m of ask.messages || []) restricted.set(m.ts, who);
    }
    for (const li of document.querySelectorAll("#messages > li.msg[data-ts]")) {
      const who = restricted.get(li.dataset.ts);
      const note = li.querySelector(":scope > .msg-main > .msg-who");
      if (note && note.textContent === who) continue;
      if (note) note.remove();
      if (!who) continue;
      const main = li.querySelector(":scope > .msg-main");
      const tools = main && main.querySelector(":scope > .msg-tools");
      if (main) main.insertBefore(h("p", { class: "msg-who" }, who), tools);
    }
  }

  function init() {
    const messages = $("messages");
    if (messages) new MutationObserver(annotate).observe(messages, { childList: true, subtree: true });
    setInterval(tick, 1000);
    loadNames();
    poll();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
