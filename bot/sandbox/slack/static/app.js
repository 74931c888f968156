// The sandbox page: a Slack channel view over the JSON API, live through server-sent events.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  users: [],
  channels: [],
  bot: null,
  user: null,
  channel: null,
  messages: [],
  thread: null,
  unread: new Set(),
  source: null,
  loads: 0,
  pending: null,
  // Slack forgets private ("Only visible to you") replies when the page reloads
  since: Date.now() / 1000,
};

function names() {
  const users = {};
  const channels = {};
  for (const u of state.users) users[u.id] = u.name;
  if (state.bot) users[state.bot.id] = state.bot.name;
  for (const c of state.channels) channels[c.id] = c.name;
  return { users, channels };
}

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  const reply = await fetch(path, options);
  let data = null;
  try { data = await reply.json(); } catch (_) { data = null; }
  return { status: reply.status, data };
}

function toast(text) {
  const box = $("toast");
  box.textContent = text;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, 5000);
}

function el(tag, className, html) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (html !== undefined) node.innerHTML = html;
  return node;
}

function textObject(obj) {
  if (!obj) return "";
  return obj.type === "mrkdwn" ? Mrkdwn.render(obj.text, names()) : Mrkdwn.escapeHtml(obj.text);
}

function timeOf(ts) {
  return new Date(parseFloat(ts) * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

// -- Block Kit ---------------------------------------------------------------------------------

function renderButton(button, message) {
  const node = el("button", `btn ${button.style || ""}`.trim());
  node.type = "button";
  node.textContent = button.text ? button.text.text : "";
  node.dataset.actionId = button.action_id || "";
  if (button.url) {
    node.addEventListener("click", () => window.open(button.url, "_blank", "noopener"));
    return node;
  }
  node.addEventListener("click", async () => {
    if (button.confirm && !(await confirmDialog(button.confirm))) return;
    node.disabled = true;
    await sendAction(message, button.action_id);
    node.disabled = false;
  });
  return node;
}

async function sendAction(message, actionId, value) {
  // a message's element, or one in a view (a modal or the Home tab)
  const body = message.view_id
    ? { user: state.user.id, view_id: message.view_id, action_id: actionId }
    : { user: state.user.id, channel: message.channel, ts: message.ts, action_id: actionId };
  if (value !== undefined) body.value = value;
  const reply = await api("/sandbox/api/click", body);
  if (reply.status !== 200 || !reply.data || reply.data.status !== 200) {
    const why = reply.data && (reply.data.error || reply.data.body) || `HTTP ${reply.status}`;
    toast(`The app did not accept the action: ${why}`);
  }
}

function renderSelect(select, message) {
  const node = el("select", "menu");
  node.dataset.actionId = select.action_id;
  const placeholder = el("option");
  placeholder.textContent = select.placeholder ? select.placeholder.text : "Choose…";
  placeholder.value = "";
  placeholder.disabled = true;
  placeholder.selected = true;
  node.appendChild(placeholder);
  for (const option of select.options || []) {
    const item = el("option");
    item.value = option.value;
    item.textContent = option.text.text;
    node.appendChild(item);
  }
  node.addEventListener("change", async () => {
    const value = node.value;
    node.disabled = true;
    await sendAction(message, select.action_id, value);
    node.disabled = false;
    node.value = "";
  });
  return node;
}

function renderElement(element, message) {
  if (element.type === "button") return renderButton(element, message);
  if (element.type === "static_select") return renderSelect(element, message);
  if (element.type === "image") {
    const img = el("img", "context-image");
    img.src = element.image_url;
    img.alt = element.alt_text || "";
    return img;
  }
  if (element.type === "plain_text" || element.type === "mrkdwn") return el("span", "", textObject(element));
  return el("span", "unsupported", Mrkdwn.escapeHtml(`[${element.type}]`));
}

function renderBlock(block, message) {
  switch (block.type) {
    case "header":
      return el("div", "block-header", Mrkdwn.escapeHtml(block.text.text));
    case "divider":
      return el("hr", "block-divider");
    case "section": {
      const node = el("div", "block-section");
      const body = el("div", "section-body");
      if (block.text) body.appendChild(el("div", "section-text", textObject(block.text)));
      if (block.fields) {
        const grid = el("div", "section-fields");
        for (const field of block.fields) grid.appendChild(el("div", "field", textObject(field)));
        body.appendChild(grid);
      }
      node.appendChild(body);
      if (block.accessory) node.appendChild(renderElement(block.accessory, message));
      return node;
    }
    case "context": {
      const node = el("div", "block-context");
      for (const element of block.elements) node.appendChild(renderElement(element, message));
      return node;
    }
    case "actions": {
      const node = el("div", "block-actions");
      for (const element of block.elements) node.appendChild(renderElement(element, message));
      return node;
    }
    case "image": {
      const img = el("img", "block-image");
      img.src = block.image_url;
      img.alt = block.alt_text || "";
      return img;
    }
    case "input":
      return renderInput(block, message);
    case "markdown":
      return el("div", "section-text", Mrkdwn.render(block.text, names()));
    default:
      return el("div", "unsupported", Mrkdwn.escapeHtml(`[${block.type} block]`));
  }
}

// -- messages ----------------------------------------------------------------------------------

function authorOf(message) {
  if (state.bot && message.user === state.bot.id) return { name: state.bot.name, bot: true };
  const user = state.users.find((u) => u.id === message.user);
  return { name: user ? user.name : message.user, bot: false };
}

function renderMessage(message, { inThread = false, replies = null } = {}) {
  const author = authorOf(message);
  const node = el("article", "message");
  node.dataset.ts = message.ts;
  if (message.ephemeral_to) node.classList.add("ephemeral");
  node.appendChild(el("div", `avatar ${author.bot ? "bot" : ""}`, Mrkdwn.escapeHtml(author.name.slice(0, 1).toUpperCase())));
  const content = el("div", "content");
  const head = el("div", "head");
  head.appendChild(el("span", "author", Mrkdwn.escapeHtml(author.name)));
  if (author.bot) head.appendChild(el("span", "badge", "APP"));
  head.appendChild(el("span", "time", timeOf(message.ts)));
  if (message.edited) head.appendChild(el("span", "edited", "(edited)"));
  content.appendChild(head);
  if (message.blocks && message.blocks.length) {
    const blocks = el("div", "blocks");
    for (const block of message.blocks) blocks.appendChild(renderBlock(block, message));
    content.appendChild(blocks);
  } else {
    content.appendChild(el("div", "text", Mrkdwn.render(message.text, names())));
  }
  for (const file of message.files || []) {
    const link = el("a", "file", `${Mrkdwn.escapeHtml(file.title || file.name)} <span class="file-size">${file.size.toLocaleString()} bytes</span>`);
    link.href = `/sandbox/api/files/${encodeURIComponent(file.id)}`;
    link.target = "_blank";
    link.rel = "noopener";
    if ((file.mimetype || "").startsWith("image/")) {
      // Slack shows a shared image inline, above its name
      const picture = document.createElement("img");
      picture.className = "file-image";
      picture.src = link.href;
      picture.alt = file.title || file.name;
      link.prepend(picture);
    }
    content.appendChild(link);
  }
  if (message.ephemeral_to) content.appendChild(el("div", "ephemeral-note", "Only visible to you"));
  if (!inThread) {
    replies = replies || state.messages.filter((m) => m.thread_ts === message.ts && m.ts !== message.ts);
    node.drawnFrom = drawnKey(message, replies);
    if (replies.length) {
      const link = el("button", "replies", `${replies.length} ${replies.length === 1 ? "reply" : "replies"} · last at ${timeOf(replies[replies.length - 1].ts)}`);
      link.type = "button";
      link.addEventListener("click", () => openThread(message.ts));
      content.appendChild(link);
    }
  }
  node.appendChild(content);
  return node;
}

// What a channel node shows: its message as sent and its thread's replies.
function drawnKey(message, replies) {
  return JSON.stringify([message, replies.map((reply) => reply.ts)]);
}

function topLevel(message) {
  return !message.thread_ts || message.thread_ts === message.ts;
}

function nearBottom(list) {
  return list.scrollHeight - list.scrollTop - list.clientHeight < 80;
}

// A view at the bottom stays there when what is drawn grows after it (a chart or a shared
// image arrives after its message); one a person scrolled up stays where they left it.
function followBottom(list) {
  let following = true;
  list.addEventListener("scroll", () => { following = nearBottom(list); });
  list.addEventListener("load", (event) => {
    // The image's height may be laid out before its load is handled, and a scroll in between
    // reads as "not at the bottom": an image in the newest message is measured out of the gap.
    const newest = event.target.closest?.("article.message") === list.lastElementChild;
    const before = list.scrollHeight - list.scrollTop - list.clientHeight - event.target.offsetHeight;
    if (following || (newest && before < 80)) list.scrollTop = list.scrollHeight;
  }, true); // an image's load does not bubble: it is caught on its way down
}

// The whole channel, drawn from what was loaded: a message whose node already shows it (the
// same message, the same replies) keeps that node, so a reload (the page's first, or one after
// the event stream reconnects) draws only what changed while it was away.
function render() {
  const list = $("messages");
  const stick = nearBottom(list);
  const replies = new Map(); // each thread's replies, counted once, not once per message
  for (const m of state.messages) {
    if (!topLevel(m)) replies.set(m.thread_ts, [...(replies.get(m.thread_ts) || []), m]);
  }
  const top = state.messages.filter(topLevel);
  const same = list.dataset.channel === state.channel;
  list.dataset.channel = state.channel;
  const drawn = new Map(same ? [...list.querySelectorAll("article.message")].map((n) => [n.dataset.ts, n]) : []);
  const nodes = top.map((message) => {
    const its = replies.get(message.ts) || [];
    const node = drawn.get(message.ts);
    if (node && node.drawnFrom === drawnKey(message, its)) return node;
    return renderMessage(message, { replies: its });
  });
  const kept = new Set(nodes);
  for (const node of [...list.children]) if (!kept.has(node)) node.remove();
  let cursor = list.firstElementChild;
  for (const node of nodes) {
    if (node === cursor) cursor = cursor.nextElementSibling;
    else list.insertBefore(node, cursor);
  }
  if (!top.length) list.appendChild(el("div", "empty", "No messages yet. Type <code>/cluster help</code> below."));
  if (stick) list.scrollTop = list.scrollHeight;
  renderThread();
}

function nodeOf(ts) {
  return $("messages").querySelector(`article.message[data-ts="${CSS.escape(ts)}"]`);
}

// One top-level message drawn in its place: edited where it is, or put after the last
// message older than it (a new one is almost always last).
function place(message) {
  const list = $("messages");
  const node = renderMessage(message);
  const old = nodeOf(message.ts);
  if (old) { old.replaceWith(node); return; }
  const empty = list.querySelector(".empty");
  if (empty) empty.remove();
  let after = list.lastElementChild;
  while (after && parseFloat(after.dataset.ts) > parseFloat(message.ts)) after = after.previousElementSibling;
  list.insertBefore(node, after ? after.nextElementSibling : list.firstElementChild);
}

function renderThread() {
  const panel = $("thread");
  if (!state.thread) { panel.hidden = true; return; }
  const parent = state.messages.find((m) => m.ts === state.thread);
  if (!parent) { state.thread = null; panel.hidden = true; return; }
  panel.hidden = false;
  const channel = state.channels.find((c) => c.id === state.channel);
  $("thread-channel").replaceChildren(...(channel ? [label(channel)] : []));
  const list = $("thread-messages");
  list.replaceChildren(renderMessage(parent, { inThread: true }));
  const replies = state.messages.filter((m) => m.thread_ts === parent.ts && m.ts !== parent.ts);
  list.appendChild(el("div", "thread-count", `${replies.length} ${replies.length === 1 ? "reply" : "replies"}`));
  for (const reply of replies) list.appendChild(renderMessage(reply, { inThread: true }));
  list.scrollTop = list.scrollHeight;
}

function openThread(ts) {
  state.thread = ts;
  renderThread();
}

function applyEvent(event) {
  // A history load in flight may answer with a list older than this event: replay it after.
  if (state.pending) state.pending.push(event);
  const message = event.message;
  if (message.ephemeral_to && message.ephemeral_to !== state.user.id) return;
  if (event.channel !== state.channel) {
    if (event.type === "message") { state.unread.add(event.channel); renderChannels(); }
    return;
  }
  const list = $("messages");
  const stick = nearBottom(list);
  const index = state.messages.findIndex((m) => m.ts === message.ts);
  if (event.type === "message_deleted") {
    if (index >= 0) state.messages.splice(index, 1);
  } else if (index >= 0) {
    state.messages[index] = message;
  } else {
    state.messages.push(message);
    const last = state.messages[state.messages.length - 2];
    if (last && parseFloat(last.ts) > parseFloat(message.ts)) {
      state.messages.sort((a, b) => parseFloat(a.ts) - parseFloat(b.ts));
    }
  }
  // only what the event changed is drawn again: the message, or the parent whose replies
  // it counts; the channel's other messages keep their nodes (and what is selected in them)
  if (!topLevel(message)) {
    const parent = state.messages.find((m) => m.ts === message.thread_ts);
    if (parent) place(parent);
  } else if (event.type === "message_deleted") {
    const node = nodeOf(message.ts);
    if (node) node.remove();
    if (!state.messages.some(topLevel)) render(); // the channel is empty again: say so
  } else {
    place(message);
  }
  if (state.thread && (message.ts === state.thread || message.thread_ts === state.thread)) renderThread();
  if (stick) list.scrollTop = list.scrollHeight;
}

// -- chrome ------------------------------------------------------------------------------------

function confirmDialog(confirm) {
  const dialog = $("confirm");
  $("confirm-title").textContent = confirm.title ? confirm.title.text : "Are you sure?";
  $("confirm-text").innerHTML = textObject(confirm.text);
  $("confirm-ok").textContent = confirm.confirm ? confirm.confirm.text : "Confirm";
  $("confirm-deny").textContent = confirm.deny ? confirm.deny.text : "Cancel";
  $("confirm-ok").className = `btn ${confirm.style === "danger" ? "danger" : "primary"}`;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
  });
}

// Slack marks a public channel with #, a private one with a lock, a DM with @. The lock is
// drawn, not an emoji: a machine without an emoji font would show a box.
const LOCK =
  '<svg viewBox="0 0 16 16" width="12" height="12" aria-label="private">' +
  '<path fill="currentColor" d="M4 7V5a4 4 0 0 1 8 0v2h1v8H3V7zm2 0h4V5a2 2 0 0 0-4 0z"/></svg>';

function label(channel) {
  const sigil = el("span", channel.is_im ? "sigil im" : channel.is_private ? "sigil private" : "sigil");
  if (channel.is_private && !channel.is_im) sigil.innerHTML = LOCK;
  else sigil.textContent = channel.is_im ? "@" : "#";
  const whole = el("span", "conversation");
  whole.append(sigil, document.createTextNode(channel.name));
  return whole;
}

function renderChannels() {
  const list = $("channel-list");
  list.replaceChildren();
  for (const channel of state.channels) {
    const item = el("li", channel.id === state.channel ? "active" : "");
    item.append(label(channel));
    if (!channel.bot_member) item.title = "clusterbot is not a member of this conversation";
    if (state.unread.has(channel.id)) item.classList.add("unread");
    if (views.home) item.classList.remove("active");
    item.addEventListener("click", () => { closeHome(); selectChannel(channel.id); });
    list.appendChild(item);
  }
}

async function loadMessages() {
  const load = ++state.loads;
  const channel = state.channel;
  state.pending = [];
  const query = new URLSearchParams({ channel, user: state.user.id });
  const reply = await api(`/sandbox/api/messages?${query}`);
  if (load !== state.loads) return; // a newer load has started
  const missed = state.pending;
  state.pending = null;
  const all = reply.data ? reply.data.messages : [];
  state.messages = all.filter((m) => !m.ephemeral_to || parseFloat(m.ts) >= state.since);
  for (const event of missed) if (event.channel === channel) applyEvent(event);
  render();
}

async function selectChannel(id) {
  state.channel = id;
  state.thread = null;
  state.unread.delete(id);
  localStorage.setItem("sandbox.channel", id);
  const channel = state.channels.find((c) => c.id === id);
  $("channel-title").replaceChildren(label(channel));
  const where = channel.is_im ? channel.name : `#${channel.name}`;
  $("composer-input").placeholder = `Message ${where}: type /cluster help, then press Enter`;
  renderChannels();
  await loadMessages();
}

function connect() {
  if (state.source) state.source.close();
  const status = $("connection");
  const source = new EventSource(`/sandbox/api/events?user=${encodeURIComponent(state.user.id)}`);
  source.onopen = () => { status.dataset.state = "live"; status.textContent = "live"; loadMessages(); };
  source.onerror = () => { status.dataset.state = "connecting"; status.textContent = "reconnecting…"; };
  source.onmessage = (e) => {
    const event = JSON.parse(e.data);
    if (event.type === "views") loadViews();
    else applyEvent(event);
  };
  state.source = source;
}

async function selectUser(id) {
  state.user = state.users.find((u) => u.id === id) || state.users[0];
  localStorage.setItem("sandbox.user", state.user.id);
  $("composer-note").textContent = "";
  $("user-picker").value = state.user.id;
  connect();
  views.draft = {};
  await loadViews();
  if (views.home) await openHome();
  if (state.channel) await loadMessages();
}

async function send(event) {
  event.preventDefault();
  const input = $("composer-input");
  const text = input.value.trim();
  if (!text) return;
  if (!text.startsWith("/")) {
    toast("This sandbox sends slash commands: start with /cluster, e.g. /cluster help");
    return;
  }
  input.value = "";
  const note = $("composer-note");
  note.textContent = `${state.user.name} ran ${text}`;
  const reply = await api("/sandbox/api/command", { user: state.user.id, channel: state.channel, text });
  if (reply.status !== 200) {
    const error = reply.data && (reply.data.hint || reply.data.error) || `HTTP ${reply.status}`;
    toast(`${text.split(" ")[0]} is not a command here: ${error}`);
    input.value = text;
  }
}

async function init() {
  const [workspace, users, channels] = await Promise.all([
    api("/sandbox/api/workspace"), api("/sandbox/api/users"), api("/sandbox/api/channels"),
  ]);
  state.bot = workspace.data.bot;
  $("team-name").textContent = workspace.data.team;
  state.users = users.data;
  state.channels = channels.data;
  const picker = $("user-picker");
  for (const user of state.users) {
    const option = el("option");
    option.value = user.id;
    option.textContent = `${user.name} (${user.role})`;
    picker.appendChild(option);
  }
  picker.addEventListener("change", () => selectUser(picker.value));
  $("composer").addEventListener("submit", send);
  $("thread-close").addEventListener("click", () => { state.thread = null; renderThread(); });
  followBottom($("messages"));
  followBottom($("thread-messages"));
  initViews();
  const savedChannel = localStorage.getItem("sandbox.channel");
  state.channel = state.channels.some((c) => c.id === savedChannel) ? savedChannel : state.channels[0].id;
  await selectUser(localStorage.getItem("sandbox.user") || state.users[0].id);
  await selectChannel(state.channel);
  $("composer-input").focus();
}

init();
