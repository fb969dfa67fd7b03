// The slack-ask playground page: renders the fake Slack's state the way Slack shows it, and reports what a
// person does to the server, which sends the bot the same signed payloads Slack would.
// Plain DOM code, no framework and no external assets. Untrusted text only ever reaches the page as text
// nodes (never innerHTML), so nothing an agent writes can become markup.
"use strict";

(() => {
  const POLL_MS = 350;
  const RESULTS_MS = 700;

  const S = {
    state: null,
    version: null,
    me: null,
    channel: null,
    results: [],
    resultsKey: "",
    seenResults: null,
    lastSeen: {},
    dismissed: new Set(),
    modalKey: null,
    serverErrorsKey: null,
    opener: null,
    openerKey: null,
    pollTimer: null,
  };

  // ------------------------------------------------------------------ small helpers

  const $ = (id) => document.getElementById(id);

  // h("button", {class: "btn", onclick: fn, "aria-label": "x"}, "text", child, [more]): a DOM node.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on") && typeof value === "function") {
        el.addEventListener(key.slice(2), value);
      } else if (key === "class") {
        el.className = value;
      } else if (["checked", "disabled", "hidden", "multiple", "required", "selected", "open", "value"].includes(key)) {
        el[key] = value;
      } else {
        el.setAttribute(key, value === true ? "" : String(value));
      }
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) append(el, child);
      else if (child instanceof Node) el.appendChild(child);
      else el.appendChild(document.createTextNode(String(child)));
    }
    return el;
  }

  let uid = 0;
  const newId = (prefix) => `${prefix}-${++uid}`;

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
    const note = h("div", { class: `toast ${kind || ""}` }, text);
    $("toasts").appendChild(note);
    setTimeout(() => note.remove(), 6000);
  }

  function userById(id) {
    return (S.state?.users || []).find((u) => u.id === id);
  }

  function people() {
    return (S.state?.users || []).filter((u) => !u.is_bot && !u.deleted);
  }

  function displayName(id) {
    const user = userById(id);
    return user ? user.name : id;
  }

  // ------------------------------------------------------------------ mrkdwn

  const EMOJI = {
    hourglass_flowing_sand: "⏳", hourglass: "⌛", arrow_heading_up: "⤴️", white_check_mark: "✅",
    heavy_check_mark: "✔️", x: "❌", warning: "⚠️", no_entry: "⛔", no_entry_sign: "🚫", star: "⭐",
    bell: "🔔", lock: "🔒", rocket: "🚀", alarm_clock: "⏰", speech_balloon: "💬", wastebasket: "🗑️",
    information_source: "ℹ️", eyes: "👀", "+1": "👍", thumbsup: "👍", "-1": "👎", thumbsdown: "👎",
    tada: "🎉", wave: "👋", question: "❓", exclamation: "❗", memo: "📝", calendar: "📅",
    stopwatch: "⏱️", red_circle: "🔴", large_green_circle: "🟢", construction: "🚧", mag: "🔍",
  };

  function emojify(text) {
    return text.replace(/:([a-z0-9_+-]+):/g, (whole, name) => EMOJI[name] || whole);
  }

  function decodeEntities(text) {
    return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  }

  const PLACEHOLDER_BASE = 0xe000;

  // Slack's mrkdwn as DOM nodes: *bold*, _italic_, ~strike~, `code`, ```pre```, > quotes, entities, and the
  // <...> tokens (mentions, dates, links). Tokens are lifted out first so formatting never splits one.
  function mrkdwn(text, options) {
    const tokens = [];
    const lifted = String(text).replace(/<([^<>\n]*)>/g, (_, inner) => {
      tokens.push(inner);
      return String.fromCharCode(PLACEHOLDER_BASE + tokens.length - 1);
    });
    const frag = document.createDocumentFragment();
    const parts = lifted.split(/```/);
    parts.forEach((part, index) => {
      const isPre = index % 2 === 1 && index < parts.length - 1;
      if (isPre) {
        frag.appendChild(h("pre", { class: "md-pre" }, plainWithTokens(part.replace(/^\n/, ""), tokens, false)));
      } else if (part) {
        frag.appendChild(blockText(part, tokens, options));
      }
    });
    return frag;
  }

  function blockText(text, tokens, options) {
    const frag = document.createDocumentFragment();
    const lines = text.split("\n");
    let quote = null;
    lines.forEach((line, index) => {
      const quoted = /^(&gt;|>)\s?/.exec(line);
      if (quoted) {
        if (!quote) {
          quote = h("blockquote", { class: "md-quote" });
          frag.appendChild(quote);
        } else {
          quote.appendChild(h("br"));
        }
        append(quote, [inline(line.slice(quoted[0].length), tokens, options)]);
        return;
      }
      quote = null;
      frag.appendChild(inline(line, tokens, options));
      if (index < lines.length - 1 && !/^(&gt;|>)/.test(lines[index + 1])) frag.appendChild(h("br"));
    });
    return frag;
  }

  const INLINE = new RegExp(
    [
      "`([^`\\n]+)`",
      "(?<![\\p{L}\\p{N}*])\\*(?!\\s)([^*\\n]+?)(?<!\\s)\\*(?![\\p{L}\\p{N}*])",
      "(?<![\\p{L}\\p{N}_])_(?!\\s)([^_\\n]+?)(?<!\\s)_(?![\\p{L}\\p{N}_])",
      "(?<![\\p{L}\\p{N}~])~(?!\\s)([^~\\n]+?)(?<!\\s)~(?![\\p{L}\\p{N}~])",
    ].join("|"),
    "gu",
  );

  function inline(text, tokens, options) {
    const frag = document.createDocumentFragment();
    let last = 0;
    for (const match of text.matchAll(INLINE)) {
      if (match.index > last) frag.appendChild(plainWithTokens(text.slice(last, match.index), tokens, true, options));
      if (match[1] !== undefined) frag.appendChild(h("code", { class: "md-code" }, plainWithTokens(match[1], tokens, false)));
      else if (match[2] !== undefined) frag.appendChild(append(h("strong"), [inline(match[2], tokens, options)]));
      else if (match[3] !== undefined) frag.appendChild(append(h("em"), [inline(match[3], tokens, options)]));
      else if (match[4] !== undefined) frag.appendChild(append(h("s"), [inline(match[4], tokens, options)]));
      last = match.index + match[0].length;
    }
    if (last < text.length) frag.appendChild(plainWithTokens(text.slice(last), tokens, true, options));
    return frag;
  }

  function plainWithTokens(text, tokens, emoji, options) {
    const frag = document.createDocumentFragment();
    let buffer = "";
    const flush = () => {
      if (buffer) frag.appendChild(document.createTextNode(emoji ? emojify(decodeEntities(buffer)) : decodeEntities(buffer)));
      buffer = "";
    };
    for (const ch of text) {
      const code = ch.codePointAt(0) - PLACEHOLDER_BASE;
      if (code >= 0 && code < tokens.length) {
        flush();
        frag.appendChild(token(tokens[code], options));
      } else {
        buffer += ch;
      }
    }
    flush();
    return frag;
  }

  // One <...> token: <@U1>, <@U1|name>, <#C1|name>, <!subteam^S1|@h>, <!here>, <!date^...|fallback>, <url|text>.
  function token(inner, options) {
    const bar = inner.indexOf("|");
    const head = bar >= 0 ? inner.slice(0, bar) : inner;
    const label = bar >= 0 ? decodeEntities(inner.slice(bar + 1)) : null;
    if (head.startsWith("@")) {
      const id = head.slice(1);
      const mine = id === S.me;
      return h("span", { class: `mention${mine ? " mention-me" : ""}`, title: id }, `@${label || displayName(id)}`);
    }
    if (head.startsWith("#")) {
      const channel = (S.state?.channels || []).find((c) => c.id === head.slice(1));
      return h("span", { class: "mention" }, `#${label || (channel ? channel.name : head.slice(1))}`);
    }
    if (head.startsWith("!subteam^")) {
      const id = head.slice("!subteam^".length);
      const group = (S.state?.usergroups || []).find((g) => g.id === id);
      const mine = group && group.users.includes(S.me);
      return h("span", { class: `mention${mine ? " mention-me" : ""}`, title: id }, label || `@${group ? group.handle : id}`);
    }
    if (head.startsWith("!date^")) return dateToken(head, label || "");
    if (head.startsWith("!")) {
      return h("span", { class: "mention mention-me" }, label || `@${head.slice(1)}`);
    }
    const url = decodeEntities(head);
    if (/^(https?:|mailto:)/i.test(url)) {
      return h("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, label || url);
    }
    return document.createTextNode(label || url);
  }

  // ------------------------------------------------------------------ dates, in the reader's time zone

  const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;

  function dayKey(date) {
    return new Intl.DateTimeFormat("en-CA", { year: "numeric", month: "2-digit", day: "2-digit" }).format(date);
  }

  function relativeDay(date) {
    const today = new Date();
    const key = dayKey(date);
    if (key === dayKey(today)) return "today";
    const offset = (days) => new Date(today.getTime() + days * 86400000);
    if (key === dayKey(offset(-1))) return "yesterday";
    if (key === dayKey(offset(1))) return "tomorrow";
    return null;
  }

  function formatDatePart(name, date) {
    const fmt = (opts) => new Intl.DateTimeFormat(undefined, opts).format(date);
    switch (name) {
      case "date_num": return dayKey(date);
      case "date": return fmt({ year: "numeric", month: "long", day: "numeric" });
      case "date_short": return fmt({ year: "numeric", month: "short", day: "numeric" });
      case "date_long": return fmt({ weekday: "long", year: "numeric", month: "long", day: "numeric" });
      case "date_pretty": return relativeDay(date) || formatDatePart("date", date);
      case "date_short_pretty": return relativeDay(date) || formatDatePart("date_short", date);
      case "date_long_pretty": return relativeDay(date) || formatDatePart("date_long", date);
      case "time": return fmt({ hour: "numeric", minute: "2-digit" });
      case "time_secs": return fmt({ hour: "numeric", minute: "2-digit", second: "2-digit" });
      case "ago": {
        const seconds = Math.round((date.getTime() - Date.now()) / 1000);
        const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
        const abs = Math.abs(seconds);
        if (abs < 60) return rtf.format(seconds, "second");
        if (abs < 3600) return rtf.format(Math.round(seconds / 60), "minute");
        if (abs < 86400) return rtf.format(Math.round(seconds / 3600), "hour");
        return rtf.format(Math.round(seconds / 86400), "day");
      }
      default: return null;
    }
  }

  function dateToken(head, fallback) {
    const [, stamp, format = "", link] = head.split("^");
    const seconds = Number(stamp);
    if (!Number.isFinite(seconds)) return document.createTextNode(fallback);
    const date = new Date(seconds * 1000);
    let text = decodeEntities(format).replace(/\{([a-z_]+)\}/g, (whole, name) => formatDatePart(name, date) ?? whole);
    text = text.charAt(0).toUpperCase() + text.slice(1);
    const full = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" }).format(date);
    const node = h("time", { datetime: date.toISOString(), title: `${full} (${ZONE}); Slack's fallback: ${fallback}`, class: "md-date" }, text);
    if (link && /^https?:/i.test(link)) return h("a", { href: link, target: "_blank", rel: "noopener noreferrer" }, node);
    return node;
  }

  function clock(ts) {
    const date = new Date(Number(ts) * 1000);
    return h(
      "time",
      { class: "msg-time", datetime: date.toISOString(), title: new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" }).format(date) },
      new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" }).format(date),
    );
  }

  // ------------------------------------------------------------------ Block Kit

  function textObj(obj, options) {
    if (!obj) return document.createTextNode("");
    if (typeof obj === "string") return document.createTextNode(obj);
    if (obj.type === "mrkdwn") return mrkdwn(obj.text || "", options);
    const plain = decodeEntities(obj.text || "");
    return document.createTextNode(obj.emoji === false ? plain : emojify(plain));
  }

  function plainString(obj) {
    if (!obj) return "";
    return decodeEntities(typeof obj === "string" ? obj : obj.text || "");
  }

  // surface: {kind: "message"|"modal", key, channel, ts, viewId, values}
  function renderBlocks(blocks, surface) {
    return (blocks || []).map((block) => renderBlock(block, surface));
  }

  function renderBlock(block, surface) {
    const wrap = (cls, ...children) => h("div", { class: `block ${cls}`, "data-block-id": block.block_id || "" }, ...children);
    switch (block.type) {
      case "header":
        return wrap("b-header", h("div", { role: "heading", "aria-level": surface.kind === "modal" ? "3" : "4" }, textObj(block.text)));
      case "section": {
        const main = h("div", { class: "section-main" });
        if (block.text) main.appendChild(h("div", { class: "section-text" }, textObj(block.text)));
        if (block.fields && block.fields.length) {
          main.appendChild(h("div", { class: "section-fields" }, block.fields.map((f) => h("div", { class: "section-field" }, textObj(f)))));
        }
        const accessory = block.accessory ? h("div", { class: "section-accessory" }, renderElement(block.accessory, block, surface)) : null;
        return wrap("b-section", main, accessory);
      }
      case "context":
        return wrap("b-context", (block.elements || []).map((el) =>
          el.type === "image" ? h("span", { class: "ctx-image", title: el.alt_text || "" }, `[${el.alt_text || "image"}]`) : h("span", { class: "ctx-item" }, textObj(el))));
      case "divider":
        return wrap("b-divider", h("hr"));
      case "actions":
        return wrap("b-actions", (block.elements || []).map((el) => renderElement(el, block, surface)));
      case "input":
        return renderInput(block, surface);
      case "image":
        return wrap("b-image", h("div", { class: "image-placeholder" }, `[image: ${block.alt_text || ""}]`), block.title ? h("div", { class: "image-title" }, textObj(block.title)) : null);
      case "rich_text":
        return wrap("b-rich", h("div", {}, richTextPlain(block)));
      default:
        return wrap("b-unknown", h("em", {}, `(a ${block.type} block: not shown in the playground)`));
    }
  }

  function richTextPlain(node) {
    if (!node || typeof node !== "object") return "";
    if (typeof node.text === "string") return node.text;
    return (node.elements || []).map(richTextPlain).join(node.type === "rich_text_list" ? "\n" : "");
  }

  function fkey(surface, block, el, extra) {
    return [surface.key, block.block_id || "", el.action_id || "", extra || ""].join("|");
  }

  // The element's current value in a modal: what the fake holds in view.state.values, else the initial one.
  function currentState(surface, block, el) {
    const entry = surface.values?.[block.block_id]?.[el.action_id];
    return entry || null;
  }

  function optionsOf(el) {
    const list = [...(el.options || [])];
    for (const group of el.option_groups || []) list.push(...(group.options || []));
    return list;
  }

  function renderElement(el, block, surface) {
    switch (el.type) {
      case "button": return renderButton(el, block, surface);
      case "static_select":
      case "external_select":
      case "users_select":
      case "conversations_select":
      case "channels_select":
        return renderSelect(el, block, surface, null);
      case "multi_static_select":
      case "multi_users_select":
      case "multi_conversations_select":
      case "multi_channels_select":
        return renderMultiSelect(el, block, surface, null);
      case "radio_buttons": return renderChoices(el, block, surface, "radio", null);
      case "checkboxes": return renderChoices(el, block, surface, "checkbox", null);
      case "overflow": return renderOverflow(el, block, surface);
      case "datepicker":
      case "timepicker":
      case "plain_text_input":
      case "number_input":
      case "email_text_input":
      case "url_text_input":
        return renderTextual(el, block, surface, null);
      case "image": return h("span", { class: "ctx-image" }, `[${el.alt_text || "image"}]`);
      default: return h("em", { class: "unknown-element" }, `(${el.type})`);
    }
  }

  function renderButton(el, block, surface) {
    const classes = ["btn"];
    if (el.style === "primary") classes.push("primary");
    if (el.style === "danger") classes.push("danger");
    const button = h("button", {
      type: "button",
      class: classes.join(" "),
      "data-fkey": fkey(surface, block, el, el.value),
      "data-action-id": el.action_id,
      "aria-label": el.accessibility_label || null,
    }, textObj(el.text));
    button.addEventListener("click", async () => {
      if (button.getAttribute("aria-busy") === "true") return;
      if (el.url && /^https?:/i.test(el.url)) window.open(el.url, "_blank", "noopener");
      if (el.confirm && !(await confirmDialog(el.confirm, button))) return;
      const extra = {};
      if (el.value !== undefined) extra.value = el.value;
      button.setAttribute("aria-busy", "true");
      S.opener = button;
      S.openerKey = button.closest("li.msg[data-key]")?.dataset.key || null;
      try {
        await act(surface, block, el, extra);
      } finally {
        button.removeAttribute("aria-busy");
      }
    });
    return button;
  }

  function dynamicOptions(el) {
    // Selects of people or conversations list the workspace's own.
    if (el.type.includes("users_select")) {
      return people().map((u) => ({ value: u.id, text: { type: "plain_text", text: `${u.name} (${u.real_name})` } }));
    }
    if (el.type.includes("conversations_select") || el.type.includes("channels_select")) {
      return (S.state?.channels || []).filter((c) => !c.is_im).map((c) => ({ value: c.id, text: { type: "plain_text", text: `#${c.name}` } }));
    }
    return optionsOf(el);
  }

  const SINGLE_KEYS = {
    users_select: "selected_user", conversations_select: "selected_conversation", channels_select: "selected_channel",
  };
  const MULTI_KEYS = {
    multi_users_select: "selected_users", multi_conversations_select: "selected_conversations", multi_channels_select: "selected_channels",
  };

  function renderSelect(el, block, surface, labelId) {
    const state = currentState(surface, block, el);
    let selected = null;
    if (SINGLE_KEYS[el.type]) selected = state ? state[SINGLE_KEYS[el.type]] : el[`initial_${SINGLE_KEYS[el.type].slice(9)}`];
    else selected = (state ? state.selected_option : el.initial_option)?.value ?? null;
    const select = h("select", {
      class: "select",
      id: labelId ? `${labelId}-input` : null,
      "aria-labelledby": labelId || null,
      "aria-label": labelId ? null : plainString(el.placeholder) || "Choose an option",
      "data-fkey": fkey(surface, block, el),
      "data-action-id": el.action_id,
      "data-kind": "single",
    });
    select.appendChild(h("option", { value: "" }, plainString(el.placeholder) || "Choose an option"));
    for (const option of dynamicOptions(el)) {
      select.appendChild(h("option", { value: option.value, selected: option.value === selected }, plainString(option.text)));
    }
    if (dispatches(block, surface)) {
      select.addEventListener("change", () => {
        if (select.value) act(surface, block, el, { value: select.value });
      });
    }
    return select;
  }

  // Multi-selects as a box of checkboxes: every option reachable with Tab and Space.
  function renderMultiSelect(el, block, surface, labelId) {
    const state = currentState(surface, block, el);
    let selected;
    if (MULTI_KEYS[el.type]) selected = state ? state[MULTI_KEYS[el.type]] || [] : [];
    else selected = ((state ? state.selected_options : el.initial_options) || []).map((o) => o.value);
    const box = h("div", {
      class: "multi-select",
      role: "group",
      "aria-labelledby": labelId || null,
      "aria-label": labelId ? null : plainString(el.placeholder) || "Choose options",
      "data-action-id": el.action_id,
      "data-kind": "multi",
    });
    for (const option of dynamicOptions(el)) {
      const id = newId("opt");
      const input = h("input", { type: "checkbox", id, value: option.value, checked: selected.includes(option.value), "data-fkey": fkey(surface, block, el, option.value) });
      box.appendChild(h("div", { class: "choice" }, input, h("label", { for: id }, textObj(option.text))));
      if (dispatches(block, surface)) {
        input.addEventListener("change", () => act(surface, block, el, { values: checkedValues(box) }));
      }
    }
    return box;
  }

  function checkedValues(container) {
    return [...container.querySelectorAll("input[type=checkbox]")].filter((i) => i.checked).map((i) => i.value);
  }

  function renderChoices(el, block, surface, kind, labelId) {
    const state = currentState(surface, block, el);
    const selected = kind === "radio"
      ? [(state ? state.selected_option : el.initial_option)?.value].filter((v) => v !== undefined)
      : ((state ? state.selected_options : el.initial_options) || []).map((o) => o.value);
    const group = h("div", {
      class: `choices choices-${kind}`,
      role: kind === "radio" ? "radiogroup" : "group",
      "aria-labelledby": labelId || null,
      "aria-label": labelId ? null : "Options",
      "data-action-id": el.action_id,
      "data-kind": kind,
    });
    const name = newId("choice");
    for (const option of optionsOf(el)) {
      const id = newId("opt");
      const input = h("input", {
        type: kind, id, name, value: option.value, checked: selected.includes(option.value),
        "data-fkey": fkey(surface, block, el, option.value),
      });
      const description = option.description ? h("span", { class: "choice-description" }, textObj(option.description)) : null;
      group.appendChild(h("div", { class: "choice" }, input, h("label", { for: id }, h("span", { class: "choice-text" }, textObj(option.text)), description)));
      if (dispatches(block, surface)) {
        input.addEventListener("change", () => {
          if (kind === "radio") act(surface, block, el, { value: option.value });
          else act(surface, block, el, { values: checkedValues(group) });
        });
      }
    }
    return group;
  }

  const INPUT_TYPES = {
    datepicker: "date", timepicker: "time", number_input: "number", email_text_input: "email", url_text_input: "url",
  };
  const TEXT_KEYS = { datepicker: "selected_date", timepicker: "selected_time" };

  function renderTextual(el, block, surface, labelId) {
    const state = currentState(surface, block, el);
    const key = TEXT_KEYS[el.type] || "value";
    const initial = state ? state[key] : el[key === "value" ? "initial_value" : `initial_${key.slice(9)}`];
    const common = {
      id: labelId ? `${labelId}-input` : null,
      class: "text-input",
      placeholder: plainString(el.placeholder) || null,
      maxlength: el.max_length || null,
      minlength: el.min_length || null,
      "aria-label": labelId ? null : plainString(el.placeholder) || el.action_id,
      "data-fkey": fkey(surface, block, el),
      "data-action-id": el.action_id,
      "data-kind": "text",
    };
    const input = el.type === "plain_text_input" && el.multiline
      ? h("textarea", { ...common, rows: 3 })
      : h("input", { ...common, type: INPUT_TYPES[el.type] || "text" });
    if (initial !== null && initial !== undefined) input.value = initial;
    if (dispatches(block, surface)) {
      // dispatch_action inputs send what was typed on Enter, as Slack does by default.
      input.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && !event.shiftKey && input.value) {
          event.preventDefault();
          act(surface, block, el, { value: input.value });
        }
      });
    }
    return input;
  }

  function renderOverflow(el, block, surface) {
    const menuId = newId("menu");
    const toggle = h("button", { type: "button", class: "btn overflow", "aria-haspopup": "true", "aria-expanded": "false", "aria-controls": menuId, "aria-label": "More actions", "data-fkey": fkey(surface, block, el) }, "⋯");
    const menu = h("div", { class: "overflow-menu", id: menuId, role: "group", hidden: true });
    const close = () => { menu.hidden = true; toggle.setAttribute("aria-expanded", "false"); };
    for (const option of optionsOf(el)) {
      menu.appendChild(h("button", { type: "button", class: "overflow-item", onclick: () => { close(); toggle.focus(); act(surface, block, el, { value: option.value }); } }, textObj(option.text)));
    }
    toggle.addEventListener("click", () => {
      menu.hidden = !menu.hidden;
      toggle.setAttribute("aria-expanded", String(!menu.hidden));
      if (!menu.hidden) menu.querySelector("button")?.focus();
    });
    menu.addEventListener("keydown", (event) => { if (event.key === "Escape") { event.stopPropagation(); close(); toggle.focus(); } });
    return h("span", { class: "overflow-wrap" }, toggle, menu);
  }

  function dispatches(block, surface) {
    return block.type !== "input" || Boolean(block.dispatch_action);
  }

  function renderInput(block, surface) {
    const el = block.element || {};
    const labelId = newId("label");
    const hintId = block.hint ? newId("hint") : null;
    const errorId = newId("error");
    const grouped = ["radio_buttons", "checkboxes", "multi_static_select", "multi_users_select", "multi_conversations_select", "multi_channels_select"].includes(el.type);
    const label = h(grouped ? "span" : "label", { class: "input-label", id: labelId, for: grouped ? null : `${labelId}-input` },
      textObj(block.label), block.optional ? h("span", { class: "optional" }, " (optional)") : null);
    let control;
    if (el.type === "radio_buttons") control = renderChoices(el, block, surface, "radio", labelId);
    else if (el.type === "checkboxes") control = renderChoices(el, block, surface, "checkbox", labelId);
    else if (el.type && el.type.startsWith("multi_")) control = renderMultiSelect(el, block, surface, labelId);
    else if (el.type && el.type.endsWith("_select")) control = renderSelect(el, block, surface, labelId);
    else control = renderTextual(el, block, surface, labelId);
    control.setAttribute("aria-describedby", [hintId, errorId].filter(Boolean).join(" "));
    if (!block.optional) control.setAttribute("aria-required", "true");
    return h("div", {
      class: "block b-input",
      "data-block-id": block.block_id || "",
      "data-input-block": block.block_id || "",
      "data-action-id": el.action_id || "",
      "data-element-type": el.type || "",
      "data-optional": block.optional ? "true" : "false",
      "data-min-length": el.min_length || "",
    },
    label, control,
    hintId ? h("p", { class: "hint", id: hintId }, textObj(block.hint)) : null,
    h("p", { class: "field-error", id: errorId, hidden: true }));
  }

  // ------------------------------------------------------------------ acting

  async function act(surface, block, el, extra) {
    const body = { user: S.me, action_id: el.action_id, block_id: block.block_id || null, ...extra };
    if (surface.kind === "modal") {
      body.view_id = surface.viewId;
      return send("/ui/view_action", body);
    }
    if (surface.kind === "home") return send("/ui/home_click", body);
    body.channel = surface.channel;
    body.ts = surface.ts;
    return send("/ui/click", body);
  }

  async function send(path, body) {
    let data;
    try {
      data = await api(path, body);
    } catch (err) {
      toast(`The playground server did not answer: ${err}`, "error");
      return null;
    }
    if (!data.ok) toast(data.error || "That did not work", "error");
    kick();
    return data;
  }

  // ------------------------------------------------------------------ dialogs

  const FOCUSABLE = "a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex='-1'])";

  function trapFocus(dialog, event) {
    if (event.key !== "Tab") return;
    const items = [...dialog.querySelectorAll(FOCUSABLE)].filter((n) => n.offsetParent !== null || n === document.activeElement);
    if (!items.length) return;
    const first = items[0];
    const last = items[items.length - 1];
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault();
      first.focus();
    }
  }

  function confirmDialog(confirm, returnTo) {
    return new Promise((resolve) => {
      const titleId = newId("confirm-title");
      const textId = newId("confirm-text");
      let overlay;
      const done = (answer) => {
        overlay.remove();
        if (returnTo && document.contains(returnTo)) returnTo.focus();
        resolve(answer);
      };
      const deny = h("button", { type: "button", class: "btn", onclick: () => done(false) }, plainString(confirm.deny) || "Cancel");
      const ok = h("button", { type: "button", class: `btn ${confirm.style === "danger" ? "danger-solid" : "primary"}`, onclick: () => done(true) }, plainString(confirm.confirm) || "Confirm");
      const dialog = h("div", { class: "dialog confirm", role: "alertdialog", "aria-modal": "true", "aria-labelledby": titleId, "aria-describedby": textId },
        h("h2", { id: titleId }, plainString(confirm.title) || "Are you sure?"),
        h("div", { id: textId, class: "confirm-text" }, textObj(confirm.text)),
        h("div", { class: "dialog-buttons" }, deny, ok));
      dialog.addEventListener("keydown", (event) => {
        if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); done(false); }
        trapFocus(dialog, event);
      });
      overlay = h("div", { class: "overlay confirm-overlay" }, dialog);
      document.body.appendChild(overlay);
      deny.focus();
    });
  }

  function topView() {
    const stack = S.state?.view_stacks?.[S.me] || [];
    const top = stack[stack.length - 1];
    return (S.state?.views || []).find((v) => v.id === top) || null;
  }

  function renderModal() {
    const root = $("modal-root");
    const view = topView();
    const key = view ? `${view.id}:${view.hash}` : null;
    if (key !== S.modalKey) {
      const hadFocus = root.contains(document.activeElement);
      root.replaceChildren();
      S.modalKey = key;
      S.serverErrorsKey = null;
      if (!view) {
        document.querySelector(".layout").removeAttribute("inert");
        if (hadFocus || document.activeElement === document.body) restoreOpener();
        return;
      }
      root.appendChild(buildModal(view));
      document.querySelector(".layout").setAttribute("inert", "");
      const first = root.querySelector(".modal-body " + FOCUSABLE) || root.querySelector(FOCUSABLE);
      first?.focus();
    }
    // Errors the bot answered are shown when they change; the page's own checks stay until then.
    const serverKey = view ? JSON.stringify(view.errors || {}) : null;
    if (view && serverKey !== S.serverErrorsKey) {
      S.serverErrorsKey = serverKey;
      showModalErrors(view.errors || {}, false);
    }
  }

  function restoreOpener() {
    // Back to what opened the modal; when the message changed meanwhile, to that message.
    const opener = S.opener;
    const message = S.openerKey && document.querySelector(`li.msg[data-key="${CSS.escape(S.openerKey)}"]`);
    if (opener && document.contains(opener)) opener.focus();
    else if (message) message.focus();
    else $("messages").focus({ preventScroll: true });
  }

  function buildModal(view) {
    const v = view.view;
    const titleId = newId("modal-title");
    const surface = { kind: "modal", key: `view:${view.id}`, viewId: view.id, values: v.state?.values || {} };
    const formId = newId("modal-form");
    const form = h("form", { class: "modal-body", id: formId, novalidate: true }, renderBlocks(v.blocks, surface));
    const general = h("p", { class: "form-error modal-error", role: "alert" });
    const closeButton = h("button", { type: "button", class: "btn", "data-modal-close": "" }, plainString(v.close) || "Cancel");
    const submitButton = v.submit ? h("button", { type: "submit", class: "btn primary", "data-modal-submit": "" }, plainString(v.submit)) : null;
    // The footer sits outside the form; `form=` makes its Submit the form's, so Enter and a click both submit.
    if (submitButton) submitButton.setAttribute("form", formId);
    const dialog = h("div", { class: "dialog modal", role: "dialog", "aria-modal": "true", "aria-labelledby": titleId, "data-view-id": view.id },
      h("div", { class: "modal-header" },
        h("h2", { id: titleId }, textObj(v.title)),
        h("button", { type: "button", class: "icon-button", "aria-label": "Close", onclick: () => closeModal(view) }, "×")),
      form,
      h("div", { class: "modal-footer" }, general, closeButton, submitButton));
    closeButton.addEventListener("click", () => closeModal(view));
    const submit = (event) => {
      event.preventDefault();
      submitModal(view, form, general, submitButton);
    };
    form.addEventListener("submit", submit);
    dialog.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { event.preventDefault(); closeModal(view); }
      trapFocus(dialog, event);
    });
    return h("div", { class: "overlay" }, dialog);
  }

  async function closeModal(view) {
    await send("/ui/close", { user: S.me, view_id: view.id });
  }

  function answerOf(container) {
    const kind = container.dataset.elementType;
    if (kind === "radio_buttons") {
      const picked = container.querySelector("input[type=radio]:checked");
      return picked ? picked.value : null;
    }
    if (kind === "checkboxes" || (kind && kind.startsWith("multi_"))) return checkedValues(container);
    const field = container.querySelector("select, input, textarea");
    if (!field) return null;
    return field.value === "" ? null : field.value;
  }

  // Slack's own client checks these before anything is sent: required fields and minimum lengths.
  function clientErrors(form) {
    const errors = {};
    for (const container of form.querySelectorAll("[data-input-block]")) {
      const answer = answerOf(container);
      const empty = answer === null || (Array.isArray(answer) && answer.length === 0);
      if (empty && container.dataset.optional !== "true") {
        errors[container.dataset.inputBlock] = "Please complete this required field.";
      }
      const min = Number(container.dataset.minLength || 0);
      if (!empty && typeof answer === "string" && min && answer.length < min) {
        errors[container.dataset.inputBlock] = `Please enter at least ${min} characters.`;
      }
    }
    return errors;
  }

  function showModalErrors(errors, focus) {
    const root = $("modal-root");
    let first = null;
    for (const container of root.querySelectorAll("[data-input-block]")) {
      const message = errors[container.dataset.inputBlock];
      const node = container.querySelector(".field-error");
      const control = container.querySelector("[aria-describedby]");
      node.textContent = message || "";
      node.hidden = !message;
      container.classList.toggle("has-error", Boolean(message));
      if (control) {
        if (message) control.setAttribute("aria-invalid", "true");
        else control.removeAttribute("aria-invalid");
      }
      if (message && !first) first = container.querySelector("input, select, textarea");
    }
    const general = root.querySelector(".modal-error");
    if (general) general.textContent = errors.response_action ? `Slack refused the bot's answer: ${errors.response_action}` : "";
    if (focus && first) first.focus();
  }

  async function submitModal(view, form, general, submitButton) {
    const local = clientErrors(form);
    if (Object.keys(local).length) {
      showModalErrors(local, true);
      return;
    }
    const values = {};
    for (const container of form.querySelectorAll("[data-input-block]")) {
      const blockId = container.dataset.inputBlock;
      values[blockId] = { [container.dataset.actionId]: answerOf(container) };
    }
    general.textContent = "";
    submitButton?.setAttribute("aria-busy", "true");
    const data = await send("/ui/submit", { user: S.me, view_id: view.id, values });
    submitButton?.removeAttribute("aria-busy");
    if (!data) return;
    if (!data.ok) {
      general.textContent = data.error || "The bot did not accept the form";
      return;
    }
    const response = data.response;
    if (response && response.response_action === "errors") showModalErrors(response.errors || {}, true);
  }

  // ------------------------------------------------------------------ conversations

  function visibleChannels() {
    const channels = S.state?.channels || [];
    return channels.filter((c) => {
      if (c.is_im) return c.user === S.me;
      return !c.is_private || c.members.includes(S.me);
    });
  }

  function channelLabel(c) {
    if (c.is_im) return S.state.bot.name;
    return c.name;
  }

  function messagesOf(channelId) {
    return S.state?.messages?.[channelId] || [];
  }

  function latestTs(channelId) {
    const list = messagesOf(channelId);
    const mine = (S.state?.ephemerals || []).filter((e) => e.channel === channelId && e.user === S.me);
    return [...list, ...mine].reduce((max, m) => (Number(m.ts) > max ? Number(m.ts) : max), 0);
  }

  function renderChannels() {
    const channels = visibleChannels();
    const build = (c) => {
      const unread = c.id !== S.channel && latestTs(c.id) > (S.lastSeen[c.id] || 0);
      const prefix = c.is_im ? presenceDot() : c.is_private ? lockIcon() : "#";
      const button = h("button", {
        type: "button",
        class: `conv${c.id === S.channel ? " current" : ""}${unread ? " unread" : ""}${c.is_archived ? " archived" : ""}`,
        "aria-current": c.id === S.channel ? "page" : null,
        "data-channel": c.id,
        onclick: () => selectChannel(c.id),
      }, h("span", { "aria-hidden": "true", class: "conv-prefix" }, prefix), channelLabel(c),
      c.is_private && !c.is_im ? h("span", { class: "visually-hidden" }, " (private)") : null,
      c.is_archived ? h("span", { class: "conv-note" }, " archived") : null,
      unread ? h("span", { class: "visually-hidden" }, " (new messages)") : null);
      return h("li", {}, button);
    };
    const keep = document.activeElement?.dataset?.channel;
    $("channel-list").replaceChildren(...channels.filter((c) => !c.is_im).map(build));
    $("dm-list").replaceChildren(...channels.filter((c) => c.is_im).map(build));
    renderHomeLink();
    if (!channels.some((c) => c.is_im)) $("dm-list").appendChild(h("li", { class: "conv-empty" }, "None yet"));
    if (keep) document.querySelector(`[data-channel="${CSS.escape(keep)}"]`)?.focus();
  }

  // Drawn, not emoji: the page must look the same on machines without an emoji font.
  function svg(viewBox, ...paths) {
    const NS = "http://www.w3.org/2000/svg";
    const node = document.createElementNS(NS, "svg");
    node.setAttribute("viewBox", viewBox);
    node.setAttribute("class", "icon");
    node.setAttribute("aria-hidden", "true");
    node.setAttribute("focusable", "false");
    for (const [tag, attrs] of paths) {
      const child = document.createElementNS(NS, tag);
      for (const [key, value] of Object.entries(attrs)) child.setAttribute(key, value);
      node.appendChild(child);
    }
    return node;
  }

  function lockIcon() {
    return svg("0 0 16 16",
      ["rect", { x: "3", y: "7", width: "10", height: "8", rx: "1.5", fill: "currentColor" }],
      ["path", { d: "M5 7V5a3 3 0 0 1 6 0v2", fill: "none", stroke: "currentColor", "stroke-width": "1.8" }]);
  }

  function presenceDot() {
    return svg("0 0 16 16", ["circle", { cx: "8", cy: "9", r: "4", fill: "#2bac76" }]);
  }

  function eyeIcon() {
    return svg("0 0 16 16",
      ["path", { d: "M1 8s2.5-5 7-5 7 5 7 5-2.5 5-7 5-7-5-7-5z", fill: "none", stroke: "currentColor", "stroke-width": "1.4" }],
      ["circle", { cx: "8", cy: "8", r: "2", fill: "currentColor" }]);
  }

  // The bot's App Home tab: opening it is what makes Slack send `app_home_opened`, and the bot
  // publishes this person's view (views.publish); the page shows the view as last published.
  const HOME = "@home";

  function selectHome() {
    S.channel = HOME;
    history.replaceState(null, "", "#home");
    renderAll();
    openHome();
  }

  function openHome() {
    send("/ui/home_open", { user: S.me });
  }

  function renderHomeLink() {
    const current = S.channel === HOME;
    const home = S.state?.homes?.[S.me];
    const button = h("button", {
      type: "button",
      class: `conv${current ? " current" : ""}`,
      "aria-current": current ? "page" : null,
      "data-channel": HOME,
      onclick: selectHome,
    }, h("span", { "aria-hidden": "true", class: "conv-prefix" }, "⌂"), `${S.state.bot.name} · Home`,
    home ? null : h("span", { class: "conv-note" }, " not opened"));
    $("app-list").replaceChildren(h("li", {}, button));
  }

  function renderHome() {
    const list = $("messages");
    const home = S.state?.homes?.[S.me];
    const sig = JSON.stringify([S.me, home ? home.hash : null]);
    $("messages-empty").hidden = true;
    if (list.dataset.home === sig) return;
    list.dataset.home = sig;
    const surface = { kind: "home", key: `home:${S.me}`, values: {} };
    const body = home
      ? h("div", { class: "msg-blocks home-view" }, renderBlocks(home.view.blocks, surface))
      : h("p", { class: "empty" }, `${S.state.bot.name} has not published a Home tab for you yet: it does when you open the tab.`);
    list.replaceChildren(h("li", { class: "msg home", "data-key": `home:${S.me}` }, body));
  }

  function selectChannel(id) {
    S.channel = id;
    S.lastSeen[id] = latestTs(id);
    history.replaceState(null, "", `#${id}`);
    renderAll();
    $("messages-scroll").scrollTop = $("messages-scroll").scrollHeight;
  }

  function authorOf(m) {
    if (m.bot_id || m.user === S.state.bot.user_id) return { name: S.state.bot.name, bot: true };
    const user = userById(m.user);
    return { name: user ? user.name : m.user, bot: false };
  }

  function initials(name) {
    return name.split(/[\s._-]+/).filter(Boolean).map((p) => p[0]).join("").slice(0, 2).toUpperCase() || "?";
  }

  function messageSurface(m, ephemeral) {
    return { kind: "message", key: `${ephemeral ? "eph" : "msg"}:${m.channel}:${m.ts}`, channel: m.channel, ts: m.ts, values: {} };
  }

  function renderMessageBody(m, ephemeral) {
    const author = ephemeral ? { name: S.state.bot.name, bot: true } : authorOf(m);
    const surface = messageSurface(m, ephemeral);
    const content = m.blocks && m.blocks.length
      ? h("div", { class: "msg-blocks" }, renderBlocks(m.blocks, surface))
      : h("div", { class: "msg-text" }, mrkdwn(m.text || ""));
    const meta = h("div", { class: "msg-meta" },
      h("span", { class: "msg-author" }, author.name),
      author.bot ? h("span", { class: "app-badge" }, "APP") : null,
      clock(m.ts),
      m.edited ? h("span", { class: "msg-edited" }, "(edited)") : null);
    const parts = [meta];
    if (ephemeral) {
      parts.unshift(h("div", { class: "eph-note" },
        eyeIcon(), "Only visible to you",
        h("button", { type: "button", class: "link-button", onclick: () => dismissEphemeral(m) }, "Dismiss")));
    }
    parts.push(content);
    return h("div", { class: "msg-body" }, parts);
  }

  function dismissEphemeral(m) {
    S.dismissed.add(`${m.channel}:${m.ts}:${m.user}`);
    renderMessages();
    $("messages").focus({ preventScroll: true });
  }

  function renderMessageItem(item) {
    const m = item.message;
    const author = item.ephemeral ? { name: S.state.bot.name, bot: true } : authorOf(m);
    const li = h("li", {
      class: `msg${item.ephemeral ? " ephemeral" : ""}`,
      tabindex: "-1",
      "data-key": item.key,
      "data-ts": m.ts,
    },
    h("div", { class: `avatar${author.bot ? " bot" : ""}`, "aria-hidden": "true" }, initials(author.name)),
    h("div", { class: "msg-main" },
      renderMessageBody(m, item.ephemeral),
      item.ephemeral || m.tombstone ? null : h("div", { class: "msg-tools" },
        h("button", { type: "button", class: "link-button", "aria-label": "Delete this message as a workspace admin", onclick: () => deleteMessage(m) }, "Delete"),
        // Type a reply in this message's thread as the person chosen above (answers by typing: docs/thread-answers.md).
        h("form", { class: "reply-form", onsubmit: (e) => replyTo(e, m) },
          h("input", { type: "text", name: "reply", "aria-label": "Reply in thread", placeholder: "Reply in thread…", autocomplete: "off" }))),
      item.replies.length ? h("details", { class: "thread", open: true },
        h("summary", {}, `${item.replies.length} ${item.replies.length === 1 ? "reply" : "replies"}`),
        h("ol", { class: "thread-replies" }, item.replies.map((r) => h("li", {
          class: `msg reply${r.ephemeral ? " ephemeral" : ""}`,
          "data-ts": r.message.ts,
        },
        h("div", { class: `avatar small${r.ephemeral || authorOf(r.message).bot ? " bot" : ""}`, "aria-hidden": "true" }, initials(r.ephemeral ? S.state.bot.name : authorOf(r.message).name)),
        h("div", { class: "msg-main" }, renderMessageBody(r.message, r.ephemeral)))))) : null));
    return li;
  }

  async function replyTo(event, m) {
    event.preventDefault();
    const input = event.target.elements.reply;
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    await send("/ui/reply", { user: S.me, channel: m.channel, thread_ts: m.thread_ts || m.ts, text });
  }

  async function deleteMessage(m) {
    const ok = await confirmDialog({
      title: { text: "Delete message?" },
      // The server says what the bot will really get: message_deleted, a tombstone, or nothing at all.
      text: { type: "plain_text", text: m.delete_note || "As a workspace admin." },
      confirm: { text: "Delete" },
      deny: { text: "Cancel" },
      style: "danger",
    }, document.activeElement);
    if (ok) await send("/ui/delete", { channel: m.channel, ts: m.ts });
  }

  function conversationItems(channelId) {
    const messages = messagesOf(channelId).map((m) => ({ message: m, ephemeral: false }));
    const ephemerals = (S.state?.ephemerals || [])
      .filter((e) => e.channel === channelId && e.user === S.me && !S.dismissed.has(`${e.channel}:${e.ts}:${e.user}`))
      .map((e) => ({ message: e, ephemeral: true }));
    const all = [...messages, ...ephemerals].sort((a, b) => Number(a.message.ts) - Number(b.message.ts));
    const top = [];
    const threads = {};
    for (const entry of all) {
      const m = entry.message;
      if (m.thread_ts && m.thread_ts !== m.ts) (threads[m.thread_ts] ||= []).push(entry);
      else top.push(entry);
    }
    const known = new Set(top.map((e) => e.message.ts));
    // A reply whose parent is gone (or private to someone else) still shows, on its own.
    for (const [parent, replies] of Object.entries(threads)) {
      if (!known.has(parent)) top.push(...replies.map((r) => ({ ...r })));
    }
    top.sort((a, b) => Number(a.message.ts) - Number(b.message.ts));
    return top.map((entry) => {
      const replies = known.has(entry.message.ts) && !entry.ephemeral ? threads[entry.message.ts] || [] : [];
      const key = `${entry.ephemeral ? "eph" : "msg"}:${entry.message.channel}:${entry.message.ts}`;
      const sig = JSON.stringify([entry.message, replies.map((r) => r.message), S.me]);
      return { key, sig, message: entry.message, ephemeral: entry.ephemeral, replies };
    });
  }

  function renderMessages() {
    const list = $("messages");
    if (S.channel === HOME) return renderHome();
    delete list.dataset.home;
    const scroller = $("messages-scroll");
    const atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 60;
    const items = S.channel ? conversationItems(S.channel) : [];
    const active = document.activeElement;
    const activeItem = active && list.contains(active) ? active.closest("li.msg[data-key]") : null;
    const focusKey = active?.dataset?.fkey || null;
    const existing = new Map([...list.children].map((li) => [li.dataset.key, li]));
    const wanted = items.map((item) => {
      const old = existing.get(item.key);
      if (old && old.dataset.sig === item.sig) return old;
      const li = renderMessageItem(item);
      li.dataset.sig = item.sig;
      return li;
    });
    // Move only what moved, so a focused element that stays is never detached (which would blur it).
    wanted.forEach((li, index) => {
      if (list.children[index] !== li) list.insertBefore(li, list.children[index] || null);
    });
    while (list.children.length > wanted.length) list.lastElementChild.remove();
    if (activeItem && !document.contains(activeItem)) {
      const again = (focusKey && list.querySelector(`[data-fkey="${CSS.escape(focusKey)}"]`))
        || list.querySelector(`li.msg[data-key="${CSS.escape(activeItem.dataset.key)}"]`);
      (again || list).focus({ preventScroll: true });
    }
    $("messages-empty").hidden = items.length > 0;
    if (atBottom) scroller.scrollTop = scroller.scrollHeight;
  }

  function renderConversationHeader() {
    if (S.channel === HOME) {
      $("conversation-title").replaceChildren(`${S.state.bot.name} · Home`);
      $("conversation-topic").textContent = `The app's Home tab of ${displayName(S.me)}: the asks waiting for them, asked for them, and answered by them lately.`;
      document.title = `${S.state.bot.name} Home · slack-ask playground`;
      return;
    }
    const channel = (S.state?.channels || []).find((c) => c.id === S.channel);
    if (!channel) return;
    $("conversation-title").replaceChildren(
      ...(channel.is_im ? [S.state.bot.name] : [channel.is_private ? lockIcon() : "#", channel.name]),
      channel.is_private && !channel.is_im ? h("span", { class: "visually-hidden" }, " (private)") : "",
    );
    let topic;
    if (channel.is_im) topic = `Your direct messages with the ${S.state.bot.name} app.`;
    else {
      const members = channel.members.map(displayName).join(", ");
      topic = `Members: ${members || "none"}${channel.bot_is_member ? `, ${S.state.bot.name} (app)` : ""}${channel.is_archived ? " · archived" : ""}`;
    }
    $("conversation-topic").textContent = topic;
    document.title = `${channel.is_im ? S.state.bot.name : "#" + channel.name} · slack-ask playground`;
  }

  function renderUsers() {
    const select = $("acting-user");
    const list = people();
    const key = list.map((u) => u.id).join(",");
    if (select.dataset.key !== key) {
      select.replaceChildren(...list.map((u) => h("option", { value: u.id }, `${u.name} (${u.real_name})`)));
      select.dataset.key = key;
    }
    select.value = S.me;
  }

  function renderActivity() {
    const entries = S.state?.activity || [];
    $("activity").replaceChildren(...entries.map((e) => h("li", { class: `activity-item ${e.ok ? "ok" : "bad"}` },
      h("span", { class: "activity-time" }, new Date(e.at * 1000).toLocaleTimeString()),
      h("span", { class: "activity-kind" }, e.kind === "api" ? "Web API" : e.kind === "event" ? "event" : "payload"),
      h("code", {}, e.what), " ", h("span", { class: "activity-detail" }, e.ok ? (e.kind === "api" ? "ok" : e.detail) : e.detail))));
  }

  function renderAskRouteOptions() {
    const route = $("ask-route");
    const responders = $("ask-responders");
    const channels = (S.state?.channels || []).filter((c) => !c.is_im && !c.is_archived);
    const key = JSON.stringify([channels.map((c) => c.id), people().map((u) => u.id)]);
    if (route.dataset.key === key) return;
    route.dataset.key = key;
    const keepRoute = route.value;
    route.replaceChildren(
      ...channels.map((c) => h("option", { value: c.id }, `#${c.name}${c.is_private ? " (private)" : ""}`)),
      ...people().map((u) => h("option", { value: u.id }, `DM to ${u.name}`)),
    );
    route.value = keepRoute || S.state.default_channel;
    const keepWho = responders.value;
    responders.replaceChildren(
      h("option", { value: "" }, "anyone who can see it"),
      ...people().map((u) => h("option", { value: u.id }, `only ${u.name}`)),
      ...(S.state?.usergroups || []).map((g) => h("option", { value: g.id }, `only @${g.handle}`)),
    );
    responders.value = keepWho;
    const requester = $("ask-requester");
    const keepRequester = requester.value;
    requester.replaceChildren(
      h("option", { value: "" }, "nobody named"),
      // By e-mail where the person has one, as an agent would name whom it acts for.
      ...people().map((u) => h("option", { value: u.email || u.id }, `${u.name} (may not vote on an approval)`)),
    );
    requester.value = keepRequester;
  }

  function renderAll() {
    if (!S.state) return;
    if (S.channel !== HOME && !visibleChannels().some((c) => c.id === S.channel)) S.channel = S.state.default_channel;
    S.lastSeen[S.channel] = Math.max(S.lastSeen[S.channel] || 0, latestTs(S.channel));
    renderUsers();
    renderChannels();
    renderConversationHeader();
    renderMessages();
    renderModal();
    renderActivity();
    renderAskRouteOptions();
  }

  // ------------------------------------------------------------------ results

  const OUTCOME_CLASS = {
    answered: "good", cancelled: "neutral", dismissed: "neutral", timeout: "warn", unavailable: "bad", error: "bad",
  };

  function renderResults() {
    const list = $("results");
    const results = S.results;
    $("results-empty").hidden = results.length > 0;
    list.replaceChildren(...results.map((r) => {
      const when = r.resolved_at ? new Date(r.resolved_at) : null;
      const who = r.responder ? ` by ${r.responder.name || r.responder.id}` : "";
      return h("li", { class: "result", "data-ask-id": r.ask_id || "", "data-outcome": r.outcome || "" },
        h("div", { class: "result-head" },
          h("span", { class: `outcome ${OUTCOME_CLASS[r.outcome] || "neutral"}` }, r.outcome || "?"),
          h("span", { class: "result-who" }, who.trim()),
          when ? h("time", { datetime: when.toISOString(), class: "result-time" }, when.toLocaleTimeString()) : null),
        h("div", { class: "result-id" }, h("code", {}, r.ask_id || "(no ask_id)"), r.format === "rich" ? " · rich" : ""),
        h("pre", { class: "result-text" }, r.text || ""),
        h("details", { class: "result-json" }, h("summary", {}, "Whole result JSON"), h("pre", {}, JSON.stringify(stripPrivate(r), null, 2))));
    }));
  }

  function stripPrivate(r) {
    const copy = { ...r };
    delete copy._list;
    return copy;
  }

  async function pollResults() {
    try {
      const data = await api("/ui/results");
      const key = JSON.stringify(data.results || []);
      if (key !== S.resultsKey) {
        S.resultsKey = key;
        const fresh = (data.results || []).filter((r) => S.seenResults && !S.seenResults.has(resultKey(r)));
        S.results = data.results || [];
        S.seenResults = new Set(S.results.map(resultKey));
        renderResults();
        if (fresh.length) {
          const r = fresh[0];
          $("results-announce").textContent = `New result: ${r.outcome} for ${r.ask_id}`;
        }
      }
      $("results-lists").textContent = `Reading ${(data.lists || []).join(", ")} (LRANGE, nothing is taken off) and the bot's store, for asks sent from anywhere else.`;
    } catch (_) {
      // The connection indicator already says the server is gone.
    }
    setTimeout(pollResults, RESULTS_MS);
  }

  function resultKey(r) {
    return `${r._list}:${r.ask_id}:${r.resolved_at}`;
  }

  // ------------------------------------------------------------------ the ask form

  const EXAMPLES = {
    "one-click": {
      format: "pi-question",
      json: { questions: [{ id: "hotfix", question: "Ship hotfix 1.4.3 now?", options: ["Ship it", "Hold until Monday"], recommended: 0 }] },
    },
    form: {
      format: "pi-question",
      json: {
        questions: [
          { id: "db", question: "Which database for the new service?", description: "Both are supported by the platform team.", options: ["Postgres", "MySQL", "SQLite"], recommended: 0, allowCustom: false },
          { id: "features", question: "Which features ship in v1?", options: ["Logging", "Metrics", "Tracing"], multi: true },
        ],
      },
    },
    rich: {
      format: "rich",
      json: {
        title: "Release review",
        questions: [
          { id: "target", type: "radio", prompt: "Where should we deploy?", options: [{ label: "Production", value: "prod" }, { label: "Staging", value: "stage", recommended: true }] },
          { id: "why", type: "text", prompt: "Anything to add?", required: false },
        ],
      },
    },
    approval: {
      format: "pi-question",
      json: { questions: [{ id: "deploy", question: "Deploy v2 to production?", options: ["Approve", "Reject"], allowCustom: false }] },
      approvals: "2",
      veto: "1",
    },
    envelope: {
      format: "pi-question",
      json: {
        v: 1,
        ask_id: "my-own-ask-1",
        reply_to: "agent-7:replies",
        route: { channel: "C0DEPLOY" },
        responders: { users: ["U0BOB"] },
        timeout_ms: 600000,
        on_timeout: "recommended",
        requester: { name: "agent-7", title: "Key rotation" },
        request: { questions: [{ id: "rotate", question: "Rotate the staging API key now?", options: ["Rotate", "Not now"], recommended: 1, category: "security-permission" }] },
      },
    },
  };

  function useExample(name) {
    const example = EXAMPLES[name];
    if (!example) return;
    const json = JSON.parse(JSON.stringify(example.json));
    if (name === "envelope") json.ask_id = `my-own-ask-${Date.now().toString(36)}`;
    $("ask-json").value = JSON.stringify(json, null, 2);
    $("ask-format").value = example.format;
    $("ask-approvals").value = example.approvals || "";
    $("ask-veto").value = example.veto || "";
    $("ask-error").textContent = "";
    $("ask-ok").textContent = "";
  }

  async function sendAsk(event) {
    event.preventDefault();
    const error = $("ask-error");
    const ok = $("ask-ok");
    const textarea = $("ask-json");
    error.textContent = "";
    ok.textContent = "";
    textarea.removeAttribute("aria-invalid");
    const timeout = $("ask-timeout").value;
    const responders = $("ask-responders").value;
    const body = {
      text: textarea.value,
      format: $("ask-format").value,
      channel: $("ask-route").value || null,
      responders: responders ? [responders] : null,
      timeout_ms: timeout ? Number(timeout) : null,
      on_timeout: $("ask-on-timeout").value || null,
      approvals: $("ask-approvals").value ? Number($("ask-approvals").value) : null,
      veto: $("ask-veto").value.trim() || null,
      requester: $("ask-requester").value || null,
    };
    let data;
    try {
      data = await api("/ui/ask", body);
    } catch (err) {
      error.textContent = `The playground server did not answer: ${err}`;
      return;
    }
    if (!data.ok) {
      error.textContent = data.error || "The ask was not sent";
      textarea.setAttribute("aria-invalid", "true");
      textarea.focus();
      return;
    }
    ok.textContent = `Sent ${data.ask_id}; its result will arrive on ${data.reply_to}.`;
    const route = $("ask-route").value;
    if (route && route.startsWith("C") && route !== S.channel) selectChannel(route);
    kick();
  }

  // ------------------------------------------------------------------ polling

  function setConnection(ok) {
    const node = $("connection");
    const text = ok ? `Live · times in ${ZONE}` : "Disconnected: is slack-ask demo still running?";
    if (node.textContent !== text) node.textContent = text;
    node.classList.toggle("bad", !ok);
  }

  async function poll() {
    clearTimeout(S.pollTimer);
    try {
      const data = await api(`/ui/state${S.version !== null ? `?since=${S.version}` : ""}`);
      setConnection(true);
      if (!data.unchanged) {
        const first = S.state === null;
        S.state = data;
        S.version = data.version;
        if (first) start();
        renderAll();
      }
    } catch (_) {
      setConnection(false);
    }
    S.pollTimer = setTimeout(poll, POLL_MS);
  }

  function kick() {
    clearTimeout(S.pollTimer);
    S.pollTimer = setTimeout(poll, 30);
  }

  function start() {
    const params = new URLSearchParams(location.search);
    const ids = people().map((u) => u.id);
    const wanted = params.get("as") || localStorage.getItem("slack-ask-playground:as");
    S.me = ids.includes(wanted) ? wanted : ids[0];
    const hash = decodeURIComponent(location.hash.slice(1));
    S.channel = hash === "home" ? HOME : (S.state.channels.some((c) => c.id === hash) && hash) || S.state.default_channel;
    if (S.channel === HOME) openHome();
    // Everything already there counts as read; only what arrives later is marked new.
    for (const c of S.state.channels) S.lastSeen[c.id] = latestTs(c.id);
  }

  function init() {
    $("acting-user").addEventListener("change", (event) => {
      S.me = event.target.value;
      localStorage.setItem("slack-ask-playground:as", S.me);
      S.modalKey = null;
      renderAll();
      if (S.channel === HOME) openHome();
    });
    $("ask-form").addEventListener("submit", sendAsk);
    for (const button of document.querySelectorAll("[data-example]")) {
      button.addEventListener("click", () => useExample(button.dataset.example));
    }
    useExample("one-click");
    poll();
    pollResults();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
