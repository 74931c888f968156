// Slack mrkdwn to safe HTML. Control sequences (<@U1>, <#C1|name>, <!here>, <url|label>) are
// taken out first, everything else is HTML-escaped, and only then is formatting applied, so no
// text from a message can become markup.
"use strict";

const Mrkdwn = (() => {
  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
  }

  // Slack sends literal &, < and > as &amp; &lt; &gt;; decode those three only, then escape.
  function slackText(text) {
    return escapeHtml(String(text).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&"));
  }

  function safeUrl(url) {
    return /^(https?:|mailto:)/i.test(url) ? url : null;
  }

  function control(body, names) {
    const [target, label] = body.split("|", 2);
    if (target.startsWith("@")) {
      const id = target.slice(1);
      const name = label || (names.users[id] || id);
      return `<span class="mention">@${slackText(name)}</span>`;
    }
    if (target.startsWith("#")) {
      const id = target.slice(1);
      const name = label || (names.channels[id] || id);
      return `<span class="mention">#${slackText(name)}</span>`;
    }
    if (target.startsWith("!")) {
      const special = target.slice(1).split("^")[0];
      if (["here", "channel", "everyone"].includes(special)) {
        return `<span class="mention">@${special}</span>`;
      }
      return `<span>${slackText(label || special)}</span>`;
    }
    const url = safeUrl(target);
    if (url) {
      return `<a href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer">${slackText(label || target)}</a>`;
    }
    return slackText(`<${body}>`);
  }

  // Slack draws :shortcodes: as emoji; these are the ones a bot commonly sends. The page ships
  // a font with emoji (fonts/noto-emoji.css), so none shows as an empty box.
  const EMOJI = {
    warning: "\u26a0\ufe0f", white_check_mark: "\u2705", heavy_check_mark: "\u2714\ufe0f",
    x: "\u274c", no_entry: "\u26d4", hourglass: "\u231b", hourglass_flowing_sand: "\u23f3",
    zzz: "\ud83d\udca4", moneybag: "\ud83d\udcb0", rotating_light: "\ud83d\udea8",
    information_source: "\u2139\ufe0f", lock: "\ud83d\udd12", wastebasket: "\ud83d\uddd1\ufe0f",
    recycle: "\u267b\ufe0f", tada: "\ud83c\udf89", eyes: "\ud83d\udc40", pushpin: "\ud83d\udccc",
    arrow_right: "\u27a1\ufe0f", gear: "\u2699\ufe0f", bulb: "\ud83d\udca1",
  };

  function emoji(text) {
    return text.replace(/:([a-z0-9_+-]+):/g, (whole, name) =>
      EMOJI[name] ? `<span class="emoji" title=":${name}:">${EMOJI[name]}</span>` : whole);
  }

  function format(text) {
    return emoji(text)
      .replace(/(^|[\s(])\*([^*\n]+)\*(?=$|[\s).,!?:;])/g, "$1<b>$2</b>")
      .replace(/(^|[\s(])_([^_\n]+)_(?=$|[\s).,!?:;])/g, "$1<i>$2</i>")
      .replace(/(^|[\s(])~([^~\n]+)~(?=$|[\s).,!?:;])/g, "$1<s>$2</s>")
      .replace(/(^|\n)&gt; ?([^\n]*)/g, "$1<blockquote>$2</blockquote>");
  }

  function render(text, names = { users: {}, channels: {} }) {
    const held = [];
    const hold = (html) => `\u0000${held.push(html) - 1}\u0000`;
    let source = String(text ?? "");
    source = source.replace(/```([\s\S]*?)```/g, (_, code) => hold(`<pre>${slackText(code.replace(/^\n/, ""))}</pre>`));
    source = source.replace(/`([^`\n]+)`/g, (_, code) => hold(`<code>${slackText(code)}</code>`));
    source = source.replace(/<([^<>\n]+)>/g, (_, body) => hold(control(body, names)));
    let html = format(slackText(source));
    html = html.replace(/\n/g, "<br>");
    return html.replace(/\u0000(\d+)\u0000/g, (_, i) => held[Number(i)]);
  }

  return { render, escapeHtml };
})();

if (typeof module !== "undefined") module.exports = Mrkdwn;
