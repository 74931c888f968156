// Modals and the Home tab on the sandbox page, over /sandbox/api/views, /click, /suggest,
// /submit, /home and /close. A modal's entries are kept in a draft while the user types;
// an element that dispatches (a select, or an input block with dispatch_action) is sent to
// the app at once, as Slack does, and the app may update the view.
"use strict";

const views = { list: [], draft: {}, home: false, timers: {} };

async function loadViews() {
  if (!state.user) return;
  const reply = await api(`/sandbox/api/views?user=${encodeURIComponent(state.user.id)}`);
  views.list = reply.data ? reply.data.views : [];
  renderModal();
  if (views.home) renderHome();
}

function topModal() {
  const modals = views.list.filter((v) => v.type === "modal");
  return modals.length ? modals[modals.length - 1] : null;
}

function entryOf(view, blockId, actionId) {
  const values = (view.state && view.state.values) || {};
  return (values[blockId] || {})[actionId] || {};
}

function draftOf(view) {
  if (!views.draft[view.id]) views.draft[view.id] = {};
  return views.draft[view.id];
}

function setDraft(view, blockId, actionId, value) {
  const draft = draftOf(view);
  draft[blockId] = draft[blockId] || {};
  draft[blockId][actionId] = value;
}

async function viewAction(view, actionId, value) {
  const reply = await api("/sandbox/api/click", { user: state.user.id, view_id: view.id, action_id: actionId, value });
  if (reply.status !== 200) toast(`The form did not take it: ${reply.data && reply.data.error || reply.status}`);
}

// -- input elements ---------------------------------------------------------------------------

function renderInput(block, view) {
  const element = block.element || {};
  const node = el("div", "block-input");
  node.dataset.blockId = block.block_id;
  const title = el("label", "input-label", Mrkdwn.escapeHtml(block.label ? block.label.text : ""));
  if (block.optional) title.appendChild(el("span", "optional", " (optional)"));
  node.appendChild(title);
  const dispatches = Boolean(block.dispatch_action);
  const draft = (draftOf(view)[block.block_id] || {})[element.action_id];
  const entry = entryOf(view, block.block_id, element.action_id);
  const send = (value) => {
    setDraft(view, block.block_id, element.action_id, value);
    if (dispatches) viewAction(view, element.action_id, value);
  };
  let field;
  if (element.type === "static_select") {
    field = el("select", "menu");
    field.appendChild(new Option(element.placeholder ? element.placeholder.text : "Choose…", ""));
    for (const option of element.options || []) field.appendChild(new Option(option.text.text, option.value));
    const chosen = draft !== undefined ? draft : (entry.selected_option || {}).value;
    field.value = chosen || "";
    field.addEventListener("change", () => send(field.value));
  } else if (element.type === "external_select") {
    field = externalSelect(element, view, entry, send);
  } else if (element.type === "file_input") {
    field = el("input", "file");
    field.type = "file";
    field.accept = (element.filetypes || []).map((t) => `.${t}`).join(",");
    field.addEventListener("change", async () => {
      const file = field.files[0];
      send(file ? { name: file.name, content: await file.text() } : []);
    });
  } else {
    const multiline = element.type === "plain_text_input" && element.multiline;
    field = el(multiline ? "textarea" : "input", "text-input");
    if (element.type === "number_input") { field.type = "number"; field.min = element.min_value; field.max = element.max_value; }
    if (element.max_length) field.maxLength = element.max_length;
    if (element.placeholder) field.placeholder = element.placeholder.text;
    field.value = draft !== undefined ? draft : entry.value || "";
    field.addEventListener("input", () => {
      setDraft(view, block.block_id, element.action_id, field.value);
      if (!dispatches) return;
      clearTimeout(views.timers[block.block_id]);
      views.timers[block.block_id] = setTimeout(() => viewAction(view, element.action_id, field.value), 350);
    });
  }
  field.dataset.actionId = element.action_id;
  field.setAttribute("aria-label", block.label ? block.label.text : element.action_id);
  node.appendChild(field);
  if (block.hint) node.appendChild(el("div", "input-hint", Mrkdwn.escapeHtml(block.hint.text)));
  const error = (view.errors || {})[block.block_id];
  if (error) node.appendChild(el("div", "input-error", Mrkdwn.escapeHtml(error)));
  return node;
}

function externalSelect(element, view, entry, send) {
  const box = el("div", "external-select");
  const input = el("input", "text-input");
  const chosen = entry.selected_option;
  input.value = chosen ? chosen.text.text : "";
  input.placeholder = element.placeholder ? element.placeholder.text : "Type to search";
  const list = el("ul", "suggestions");
  list.hidden = true;
  const suggest = async () => {
    const reply = await api("/sandbox/api/suggest", { user: state.user.id, view_id: view.id, action_id: element.action_id, value: input.value });
    list.replaceChildren();
    for (const option of (reply.data && reply.data.options) || []) {
      const item = el("li", "suggestion", Mrkdwn.escapeHtml(option.text.text));
      item.addEventListener("mousedown", (event) => {
        event.preventDefault();
        input.value = option.text.text;
        list.hidden = true;
        send(option.value);
      });
      list.appendChild(item);
    }
    list.hidden = !list.children.length;
  };
  input.addEventListener("focus", suggest);
  input.addEventListener("input", () => { clearTimeout(views.timers.suggest); views.timers.suggest = setTimeout(suggest, 200); });
  input.addEventListener("blur", () => { list.hidden = true; });
  box.append(input, list);
  return box;
}

// -- the modal --------------------------------------------------------------------------------

function renderModal() {
  const overlay = $("modal");
  const view = topModal();
  if (!view) { overlay.hidden = true; return; }
  const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.actionId : null;
  overlay.hidden = false;
  $("modal-title").textContent = view.title;
  const body = $("modal-body");
  body.replaceChildren();
  const general = (view.errors || {})[""];
  if (general) body.appendChild(el("div", "input-error", Mrkdwn.escapeHtml(general)));
  for (const block of view.blocks) {
    body.appendChild(block.type === "input" ? renderInput(block, view) : renderBlock(block, { view_id: view.id }));
  }
  $("modal-cancel").textContent = view.close || "Cancel";
  const submit = $("modal-submit");
  submit.hidden = !view.submit;
  submit.textContent = view.submit || "";
  if (focused) {
    const again = body.querySelector(`[data-action-id="${focused}"]`);
    if (again && again.focus) again.focus();
  }
}

async function submitModal() {
  const view = topModal();
  if (!view) return;
  const submit = $("modal-submit");
  submit.disabled = true;
  const reply = await api("/sandbox/api/submit", { user: state.user.id, view_id: view.id, values: draftOf(view) });
  submit.disabled = false;
  if (reply.status !== 200) toast(`The form was not sent: ${reply.data && reply.data.error || reply.status}`);
  await loadViews();
}

async function cancelModal() {
  await api("/sandbox/api/close", { user: state.user.id });
  await loadViews();
}

// -- the Home tab -----------------------------------------------------------------------------

async function openHome() {
  views.home = true;
  document.body.classList.add("home-open");
  $("channel-title").textContent = "clusterbot · Home";
  renderChannels();
  $("home").replaceChildren(el("div", "empty", "Opening Home…"));
  const reply = await api("/sandbox/api/home", { user: state.user.id });
  if (!reply.data || reply.data.status !== 200) toast("The app did not answer the Home tab");
  await loadViews();
}

function closeHome() {
  views.home = false;
  document.body.classList.remove("home-open");
}

function renderHome() {
  const home = views.list.find((v) => v.type === "home");
  const pane = $("home");
  pane.replaceChildren();
  if (!home) { pane.appendChild(el("div", "empty", "clusterbot has not published a Home tab for you yet.")); return; }
  for (const block of home.blocks) pane.appendChild(renderBlock(block, { view_id: home.id }));
}

function initViews() {
  $("modal-submit").addEventListener("click", submitModal);
  $("modal-cancel").addEventListener("click", cancelModal);
  $("home-entry").addEventListener("click", openHome);
}
