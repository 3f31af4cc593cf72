/*! Front Desk web chat widget, served by the Front Desk binary at /webchat/widget.js.
 * Embed:  <script src="https://frontdesk.example.com/webchat/widget.js" data-key="wk_..." async></script>
 * Plain ES2019, no dependencies, no build step, ASCII only (a page's charset cannot garble it). The protocol it
 * speaks is docs/webchat.md.
 * Rules kept throughout: every request goes to the script's own origin; message data is only ever put in the
 * page through textContent / text nodes (never innerHTML); the UI lives in an open Shadow DOM. */
(function () {
  "use strict";

  var script = document.currentScript ||
    document.querySelector('script[data-key][src*="/webchat/widget.js"]');
  if (!script || window.__frontdeskWebchat || !window.WebSocket || !window.fetch) return;
  var KEY = script.getAttribute("data-key") || "";
  if (!/^wk_[0-9A-Za-z]+$/.test(KEY)) {
    console.warn("Front Desk web chat: data-key must be the channel's widget key (wk_...)");
    return;
  }
  window.__frontdeskWebchat = true;
  var ORIGIN = new URL(script.src, location.href).origin;
  var STORE = "frontdesk:" + KEY;

  // ---- state
  var cfg = { title: "Chat with us", greeting: "Hi! How can we help?", color: "#2563eb", position: "right" };
  var token = load();
  var session = null;      // the promise of the running session start/resume
  var ready = false;       // the session answered: the thread is loaded and the socket may connect
  var ws = null, attempts = 0, retryTimer = 0, healthyTimer = 0;
  var lastFrameAt = 0, lastPingAt = 0, lastTypingAt = 0, blockedUntil = 0;
  var byId = {};           // message id -> entry {m, key, seq, el}
  var order = [];          // entries sorted by created_at, then arrival
  var pending = {};        // client_message_id -> {text, el, timer, failed, renewed}
  var cursor = null;       // newest entry seen on the stream (session answer, socket, replay): ?after=
  var seenEntry = null, seenSentId = null, seenSentAt = 0, seenTries = 0, seenTimer = 0;
  var seq = 0, isOpen = false, typingTimer = 0, noticeTimer = 0;
  var ui = {};

  function load() { try { return localStorage.getItem(STORE); } catch (e) { return null; } }
  function save(t) { try { if (t) localStorage.setItem(STORE, t); else localStorage.removeItem(STORE); } catch (e) { /* storage blocked: this page view only */ } }

  // ---- HTTP
  // Every visitor API URL carries ?key=: a CORS preflight has no body, so the key in the URL is how the server
  // knows which channel's allowed_origins to grant.
  function url(path, query) {
    var u = new URL(path, ORIGIN);
    Object.keys(query || {}).forEach(function (k) { if (query[k] != null) u.searchParams.set(k, query[k]); });
    u.searchParams.set("key", KEY);
    return u.href;
  }

  function api(method, path, body, query) {
    var headers = {};
    if (body) headers["Content-Type"] = "application/json";
    if (token && /\/messages$/.test(path)) headers.Authorization = "Bearer " + token;
    return fetch(url(path, query), {
      method: method, headers: headers, body: body ? JSON.stringify(body) : undefined,
      credentials: "omit", cache: "no-store"
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (j) {
        if (r.ok) return j;
        var err = new Error((j.error && j.error.message) || "HTTP " + r.status);
        err.status = r.status;
        err.retryAfter = +r.headers.get("Retry-After") || (j.error && j.error.retry_after) || 0;
        throw err;
      });
    });
  }

  // ---- sessions
  // create=false only resumes a stored token: page views alone must never create contacts.
  function openSession(create) {
    if (session) return session;
    if (!token && !create) return Promise.reject(new Error("no session"));
    var body = { widget_key: KEY, page_url: location.href };
    if (token) body.token = token;
    session = api("POST", "/webchat/v1/sessions", body).then(adopt, function (err) {
      session = null;
      if (err.status === 401 && body.token) { invalidate(); if (create) return openSession(true); }
      throw err;
    });
    return session;
  }

  function adopt(j) {
    if (j.token !== token) { token = j.token; save(token); }
    applyConfig(j.widget);
    (j.messages || []).forEach(function (m) { upsert(m, null, true); });
    ready = true;
    updateBadge();
    connect();
    return j;
  }

  // The token is no longer valid (401, close code 4401): forget it here and in every tab.
  function invalidate() { save(null); return reset(); }

  // Forgets this tab's session and its thread. Messages in flight are shown as not sent (with Retry); their ids
  // are returned so a caller that starts a new session at once can send them again.
  function reset() {
    token = null; session = null; ready = false; cursor = null; seenEntry = null; seenSentId = null;
    clearTimeout(seenTimer);
    dropSocket(false);
    clearTimeout(retryTimer);
    order.forEach(function (e) { e.el.remove(); });
    order = []; byId = {};
    updateBadge();
    return Object.keys(pending).filter(function (id) {
      var inFlight = !!pending[id].timer;
      if (inFlight) fail(id);
      return inFlight;
    });
  }

  function sessionFailed(err) {
    if (err.status === 401) return;   // the stored token was forgotten; a new session starts when needed
    if (err.status === 404) notice("This chat is not available right now.");
    else if (err.status === 403) notice("This chat is not enabled on this site.");
    else if (err.status === 429) notice("Too many attempts. Try again in a moment.", err.retryAfter || 10);
    else if (err.status) notice("Something went wrong. Please try again.", 8);
    else if (token) retry(false);   // offline while resuming: try again with back-off
    else unreachable();
  }

  // No answer at all: offline, or the server refused this page's origin (a CORS refusal looks the same to a script).
  function unreachable() {
    if (navigator.onLine === false) return notice("You're offline. Check your connection.", 8);
    console.warn("Front Desk web chat: no answer from " + ORIGIN + ". If the browser reports a CORS error, add " +
      location.origin + " to the channel's allowed_origins.");
    notice("Can't reach the chat right now. Please try again later.", 8);
  }

  // ---- the socket
  function socketOpen() { return ws && ws.readyState === 1; }
  function frame(f) { if (socketOpen()) ws.send(JSON.stringify(f)); }

  function connect() {
    clearTimeout(retryTimer);
    if (!ready || !token || ws) return;
    var s = ws = new WebSocket(url("/webchat/v1/ws", { token: token, after: cursor && cursor.m.id }).replace(/^http/, "ws"));
    var opened = false;
    s.onopen = function () {
      opened = true;
      lastFrameAt = lastPingAt = Date.now();
      healthyTimer = setTimeout(function () { attempts = 0; }, 60000);   // a healthy minute resets the back-off
      notice("");
      markSeen();
    };
    s.onmessage = function (ev) {
      lastFrameAt = Date.now();
      var f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f && typeof f === "object") onFrame(f);
    };
    s.onclose = function (ev) { if (ws === s) { dropSocket(ev.code !== 4401); closed(ev.code, opened); } };
  }

  // Detaches and closes the socket at once: a dead TCP connection may take minutes to report its close.
  function dropSocket(flush) {
    var s = ws;
    ws = null;
    clearTimeout(healthyTimer);
    typing(false);
    if (!s) return;
    s.onopen = s.onmessage = s.onclose = null;
    try { s.close(); } catch (e) { /* already closing */ }
    // Messages sent on it and not yet echoed go again over HTTP (same client_message_id: never stored twice).
    if (flush) Object.keys(pending).forEach(function (id) { if (pending[id].timer) post(id); });
  }

  function closed(code, opened) {
    if (code === 4401) {   // the session was revoked: a new one, at once if the visitor is chatting
      invalidate().forEach(deliver);
      if (isOpen) openSession(true).catch(sessionFailed);
      return;
    }
    if (code === 1012 && opened) return retry(true);
    if (opened) return retry(false);
    // The handshake failed and the browser does not say why: ask over HTTP, which also fetches what was missed.
    catchUp().then(function () { retry(false); }, function (err) {
      if (err.status === 401) invalidate();
      else if (err.status === 403 || err.status === 404) sessionFailed(err);
      else retry(false);
    });
  }

  function catchUp() {
    var q = { limit: 100 };
    if (cursor) q.after = cursor.m.id;
    return api("GET", "/webchat/v1/messages", null, q).then(function (j) {
      (j.messages || []).forEach(function (m) { upsert(m, null, true); arrived(m); });
      if (j.has_more && cursor) return catchUp();
    });
  }

  // 1 s doubling to 30 s (from 0.5 s when the server asked for it, 1012), +-20 % jitter so a restarted server is
  // not hit by every widget in the same instant.
  function retry(soon) {
    clearTimeout(retryTimer);
    var base = Math.min(30000, (soon ? 500 : 1000) * Math.pow(2, attempts++));
    retryTimer = setTimeout(reconnect, Math.min(30000, base * (0.8 + Math.random() * 0.4)));
    if (!soon && attempts > 1) notice(navigator.onLine === false ? "You're offline. Reconnecting when you're back\u2026" : "Reconnecting\u2026");
  }

  function reconnect() {
    if (!token) return;
    if (ready) connect(); else openSession(false).catch(sessionFailed);
  }

  // App-level liveness: a ping every 25 s, and a socket that answered nothing within 60 s of a ping is dead.
  // Checked every 5 s rather than by one 60 s timer, because background tabs throttle timers to once a minute.
  setInterval(function () {
    if (!socketOpen()) return;
    var now = Date.now();
    if (lastFrameAt < lastPingAt && now - lastFrameAt > 60000) { dropSocket(true); retry(false); }
    else if (now - lastPingAt >= 25000) { lastPingAt = now; frame({ type: "ping" }); }
  }, 5000);

  function onFrame(f) {
    var m = f.message;
    switch (f.type) {
      case "message":
        if (!m) return;
        upsert(m, f.client_message_id, true);
        arrived(m);
        break;
      case "message_updated": case "message_removed": case "reaction": case "status":
        if (m && byId[m.id]) upsert(m, null, false);   // changes to messages older than the loaded thread are moot
        break;
      case "typing":
        typing(!!f.on);
        break;
      case "error":
        if (f.code === "rate_limited" && f.retry_after) blockedUntil = Date.now() + f.retry_after * 1000;
        notice(f.message || "Something went wrong.", f.retry_after || 8);
        if (f.client_message_id && pending[f.client_message_id]) fail(f.client_message_id);
        break;
    }
  }

  // A new message reached the thread (live or caught up).
  function arrived(m) {
    if (m.direction !== "outbound") return;
    typing(false);
    markSeen();
  }

  // ---- the thread
  // created_at is RFC 3339 in UTC with 0, 3, 6 or 9 fraction digits; padding to 9 makes strings that sort by time.
  function timeKey(m) {
    var t = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(m.created_at || "");
    return t ? t[1] + "." + ((t[2] || "") + "000000000").slice(0, 9) : String(m.created_at || "");
  }
  function cmp(a, b) { return a.key < b.key ? -1 : a.key > b.key ? 1 : a.seq - b.seq; }

  // Inserts or replaces a message by id: a frame seen twice changes nothing. A pending message whose echo this is
  // (same client_message_id) turns into it.
  function upsert(m, clientId, fromStream) {
    if (!m || !m.id) return;
    var p = clientId && pending[clientId];
    if (p) { clearTimeout(p.timer); delete pending[clientId]; }
    var e = byId[m.id];
    var follow = nearBottom() || !!p;
    if (e) {
      e.m = m;
      if (p) p.el.remove();
      draw(e.el, m, null);
    } else {
      e = byId[m.id] = { m: m, key: timeKey(m), seq: ++seq, el: p ? p.el : el("div") };
      draw(e.el, m, null);   // before placing: it is no longer [data-pending]
      var i = order.length;
      while (i > 0 && cmp(order[i - 1], e) > 0) i--;
      order.splice(i, 0, e);
      // Stored messages go before the pending ones, which stay last until their echo arrives.
      var next = order[i + 1] ? order[i + 1].el : ui.thread.querySelector("[data-pending]") || ui.typing;
      if (e.el.parentNode !== ui.thread || e.el.nextSibling !== next) ui.thread.insertBefore(e.el, next);
    }
    if (fromStream && (!cursor || cmp(e, cursor) > 0)) cursor = e;
    group();
    updateBadge();
    if (follow) scrollDown();
  }

  // Renders one message (or a pending one when m is null). Message text goes in through text nodes only.
  function draw(d, m, p) {
    var mine = !m || m.direction !== "outbound";
    d.className = "msg " + (mine ? "me" : "them");
    d.setAttribute("data-fd", "msg");
    d.setAttribute("data-direction", m ? m.direction : "inbound");
    d.setAttribute("data-id", m ? m.id : "");
    if (m) d.removeAttribute("data-pending"); else d.setAttribute("data-pending", p.failed ? "failed" : "sending");
    d.textContent = "";
    d.appendChild(el("span", { class: "sr" }, mine ? "You: " : cfg.title + ": "));
    var b = d.appendChild(el("div", { class: "bubble", "data-fd": "text" }));
    if (m && m.removed) { b.className += " removed"; b.textContent = "(message removed)"; }
    else {
      linkify(b, m ? m.text || "" : p.text);
      ((m && m.attachments) || []).forEach(function (a) {
        if (!/^https?:/i.test(a.url || "")) return;
        b.appendChild(el("br"));
        b.appendChild(link(a.url, "\uD83D\uDCCE " + (a.filename || "attachment")));
      });
    }
    if (m && m.reactions && m.reactions.length) {
      d.appendChild(el("div", { class: "reactions", "data-fd": "reactions" }, m.reactions.map(function (r) { return r.emoji; }).join(" ")));
    }
    var meta = d.appendChild(el("div", { class: "meta" }));
    if (m) {
      var t = new Date(m.created_at);
      if (!isNaN(t)) meta.appendChild(el("span", { class: "time" }, t.toLocaleTimeString([], { hour: "numeric", minute: "2-digit" })));
      if (m.edited && !m.removed) meta.appendChild(el("span", null, "(edited)"));
    } else if (!p.failed) meta.appendChild(el("span", null, "Sending\u2026"));
    else {
      meta.appendChild(el("span", { class: "failed" }, "Not sent."));
      var again = meta.appendChild(el("button", { class: "retry", type: "button", "data-fd": "retry" }, "Retry"));
      again.onclick = function () { var id = d.getAttribute("data-client-id"); if (pending[id]) deliver(id); };
    }
  }

  // Consecutive messages from one side within a minute form a group: tighter, and only its last one is timed.
  function group() {
    order.forEach(function (e, i) {
      var n = order[i + 1];
      var same = n && n.m.direction === e.m.direction && n.key.slice(0, 16) === e.key.slice(0, 16);
      e.el.classList.toggle("grouped", !!same);
    });
  }

  // Turns http(s) URLs into links, built as elements (never parsed HTML).
  function linkify(node, text) {
    var re = /\bhttps?:\/\/[^\s<>"']+/gi, last = 0, found;
    while ((found = re.exec(text))) {
      var href = found[0].replace(/[.,;:!?)\]}'"]+$/, "");   // trailing punctuation belongs to the sentence
      node.appendChild(document.createTextNode(text.slice(last, found.index)));
      node.appendChild(link(href, href));
      last = re.lastIndex = found.index + href.length;
    }
    node.appendChild(document.createTextNode(text.slice(last)));
  }

  function link(href, text) {
    return el("a", { href: href, target: "_blank", rel: "noopener noreferrer nofollow" }, text);
  }

  function nearBottom() { var t = ui.thread; return t.scrollHeight - t.scrollTop - t.clientHeight < 80; }
  function scrollDown() { ui.thread.scrollTop = ui.thread.scrollHeight; }
  // Runs a change to the panel's layout and keeps the thread at its end if the visitor was reading the end.
  function keepEnd(change) {
    var follow = ui.thread && nearBottom();
    change();
    if (follow) scrollDown();
  }

  // ---- sending
  function send(text) {
    var id = "c-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 10);
    var p = pending[id] = { text: text, el: el("div", { "data-client-id": id }) };
    draw(p.el, null, p);
    ui.thread.insertBefore(p.el, ui.typing);   // optimistic: shown at once, after every stored message
    scrollDown();
    deliver(id);
  }

  function deliver(id) {
    var p = pending[id];
    p.failed = false;
    draw(p.el, null, p);
    openSession(true).then(function () {
      if (!pending[id]) return;
      if (socketOpen()) {
        frame({ type: "message", text: p.text, client_message_id: id });
        // No echo within 8 s: the socket may be half dead. The POST with the same id never stores it twice.
        p.timer = setTimeout(function () { post(id); }, 8000);
      } else post(id);
    }, function (err) { sessionFailed(err); fail(id); });
  }

  function post(id) {
    var p = pending[id];
    if (!p) return;
    clearTimeout(p.timer);
    p.timer = 0;
    api("POST", "/webchat/v1/messages", { text: p.text, client_message_id: id }).then(function (j) {
      upsert(j.message, id, false);
    }, function (err) {
      if (!pending[id]) return;
      if (err.status === 401 && !p.renewed) { p.renewed = true; invalidate(); return deliver(id); }
      if (err.status === 429) {
        blockedUntil = Date.now() + (err.retryAfter || 10) * 1000;
        notice("You're sending messages too quickly. Try again in a moment.", err.retryAfter || 10);
      } else if (!err.status) notice("Can't reach the chat. Check your connection.", 8);
      else if (err.status !== 401) notice(err.message, 8);
      fail(id);
    });
  }

  function fail(id) {
    var p = pending[id];
    if (!p) return;
    clearTimeout(p.timer);
    p.timer = 0;
    p.failed = true;
    keepEnd(function () { draw(p.el, null, p); });
  }

  // ---- seen, unread, typing
  function latestFromUs() {
    for (var i = order.length - 1; i >= 0; i--) if (order[i].m.direction === "outbound") return order[i];
    return null;
  }

  // The visitor looks at the thread: tell the server which business message is the newest seen. The server
  // confirms with a status frame (read); without one, say it again a few times, 3 s, 6 s and 9 s later: a seen
  // frame can be lost with a dying socket, or reach the server before it has recorded the reply as sent.
  function markSeen() {
    if (!isOpen || document.visibilityState !== "visible") return;
    var e = latestFromUs();
    if (!e) return;
    seenEntry = e;
    var again = e.m.id === seenSentId;
    if (socketOpen() && e.m.status !== "read" && (!again || (seenTries < 4 && Date.now() - seenSentAt >= 2900))) {
      seenTries = again ? seenTries + 1 : 1;
      seenSentId = e.m.id;
      seenSentAt = Date.now();
      frame({ type: "seen", message_id: e.m.id });
      clearTimeout(seenTimer);
      if (seenTries < 4) seenTimer = setTimeout(markSeen, 3000 * seenTries);
    }
    updateBadge();
  }

  function updateBadge() {
    if (!ui.badge) return;
    var n = 0;
    order.forEach(function (e) {
      var m = e.m;
      if (m.direction === "outbound" && !m.removed && m.status !== "read" && (!seenEntry || cmp(e, seenEntry) > 0)) n++;
    });
    var show = !isOpen && n > 0;
    ui.badge.hidden = !show;
    ui.badge.textContent = n > 9 ? "9+" : String(n);
    ui.launcher.setAttribute("aria-label", (isOpen ? "Close chat" : "Open chat") + (show ? " (" + n + " unread)" : ""));
  }

  function typing(on) {
    clearTimeout(typingTimer);
    if (!ui.typing) return;
    keepEnd(function () { ui.typing.hidden = !on; });
    if (on) typingTimer = setTimeout(function () { typing(false); }, 10000);
  }

  function notice(text, seconds) {
    clearTimeout(noticeTimer);
    if (!ui.status) return;
    keepEnd(function () {
      ui.status.textContent = text;
      ui.status.hidden = !text;
    });
    if (text && seconds) noticeTimer = setTimeout(function () { notice(""); }, seconds * 1000);
  }

  // ---- the UI
  // An element with attributes ("class" too) and text; text always goes in as text, never as markup.
  function el(tag, attrs, text) {
    var n = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    if (text != null) n.textContent = text;
    return n;
  }

  // Static icons (constants, never data).
  var ICON_CHAT = '<svg viewBox="0 0 24 24" width="28" height="28" aria-hidden="true"><path fill="currentColor" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-4.4 3.5A1 1 0 0 1 3 20.7V6a2 2 0 0 1 1-2zm3 6.5a1.5 1.5 0 1 0 0 .01zm5 0a1.5 1.5 0 1 0 0 .01zm5 0a1.5 1.5 0 1 0 0 .01z"/></svg>';
  var ICON_DOWN = '<svg viewBox="0 0 24 24" width="26" height="26" aria-hidden="true"><path fill="none" stroke="currentColor" stroke-width="2.4" stroke-linecap="round" stroke-linejoin="round" d="m6 9 6 6 6-6"/></svg>';
  var ICON_CLOSE = '<svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true"><path fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round" d="M6 6l12 12M18 6 6 18"/></svg>';
  var ICON_SEND = '<svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true"><path fill="currentColor" d="M3.4 20.4 21 12 3.4 3.6 3.4 10l12.6 2-12.6 2z"/></svg>';

  var CSS = [
    ":host{all:initial}",
    "*{box-sizing:border-box}",
    "[hidden]{display:none!important}",
    ".root{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif;color:#0f172a;-webkit-font-smoothing:antialiased}",
    "button{font:inherit;cursor:pointer}",
    ":focus-visible{outline:2px solid var(--accent);outline-offset:2px}",
    ".launcher{position:fixed;bottom:20px;right:20px;z-index:2147483000;width:56px;height:56px;border:0;border-radius:50%;background:var(--accent);color:var(--on-accent);display:flex;align-items:center;justify-content:center;box-shadow:0 4px 14px rgba(15,23,42,.25);transition:transform .15s ease}",
    ".launcher:hover{transform:scale(1.06)}",
    ".icon{display:flex}",
    ".launcher:focus-visible{outline:3px solid var(--accent);outline-offset:3px}",
    ".left .launcher{right:auto;left:20px}",
    ".badge{position:absolute;top:-3px;right:-3px;min-width:20px;height:20px;padding:0 6px;border-radius:10px;background:#dc2626;color:#fff;font-size:12px;font-weight:700;line-height:20px;text-align:center;box-shadow:0 0 0 2px #fff}",
    ".panel{position:fixed;bottom:88px;right:20px;z-index:2147483000;width:376px;height:min(620px,calc(100vh - 108px));display:flex;flex-direction:column;background:#f8fafc;border-radius:16px;overflow:hidden;box-shadow:0 12px 48px rgba(15,23,42,.22),0 2px 8px rgba(15,23,42,.08);animation:fd-in .18s ease-out}",
    ".left .panel{right:auto;left:20px}",
    "@keyframes fd-in{from{opacity:0;transform:translateY(12px) scale(.98)}to{opacity:1;transform:none}}",
    ".head{display:flex;align-items:center;gap:12px;padding:16px 12px 16px 18px;background:var(--accent);background:linear-gradient(135deg,var(--accent),var(--accent-deep));color:var(--on-accent);box-shadow:0 1px 0 rgba(15,23,42,.08);position:relative;z-index:1}",
    ".avatar{flex:none;width:36px;height:36px;border-radius:50%;background:rgba(255,255,255,.22);display:flex;align-items:center;justify-content:center;font-weight:700;font-size:16px}",
    ".title{flex:1;margin:0;font-size:16px;font-weight:650;line-height:1.3;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}",
    ".close{flex:none;width:36px;height:36px;border:0;border-radius:50%;background:transparent;color:inherit;display:flex;align-items:center;justify-content:center}",
    ".close:hover{background:rgba(127,127,127,.2)}",
    ".close:focus-visible{outline-color:var(--on-accent);outline-offset:-2px}",
    ".thread{flex:1;overflow-y:auto;overscroll-behavior:contain;padding:16px 14px 8px;display:flex;flex-direction:column;gap:2px}",
    ".msg{display:flex;flex-direction:column;max-width:82%;margin-top:10px}",
    ".grouped+.msg{margin-top:3px}",
    ".grouped .time,.meta:empty{display:none}",
    ".grouped+.me .bubble{border-top-right-radius:6px}.grouped+.them .bubble{border-top-left-radius:6px}",
    ".me{align-self:flex-end;align-items:flex-end}",
    ".them{align-self:flex-start;align-items:flex-start}",
    ".bubble{padding:9px 13px;border-radius:18px;white-space:pre-wrap;overflow-wrap:anywhere}",
    ".me .bubble{background:var(--accent);color:var(--on-accent);border-bottom-right-radius:6px}",
    ".them .bubble{background:#fff;color:#0f172a;border:1px solid #e5e7eb;border-bottom-left-radius:6px;box-shadow:0 1px 2px rgba(15,23,42,.05)}",
    ".bubble a{color:inherit;text-decoration:underline}",
    ".bubble.removed{font-style:italic;opacity:.7}",
    "[data-pending] .bubble{opacity:.72}",
    "[data-pending=failed] .bubble{opacity:1;background:#fee2e2;color:#7f1d1d}",
    ".reactions{margin:-8px 10px 0;padding:0 6px;background:#fff;border:1px solid #e2e8f0;border-radius:11px;font-size:13px;line-height:20px;position:relative;box-shadow:0 1px 2px rgba(15,23,42,.08)}",
    ".meta{display:flex;gap:6px;padding:3px 6px 0;font-size:11px;color:#64748b}",
    ".failed{color:#b91c1c}",
    ".retry{border:0;background:none;padding:0;color:#b91c1c;font-size:11px;font-weight:600;text-decoration:underline}",
    ".typing{align-self:flex-start;margin-top:10px;padding:11px 14px;background:#fff;border:1px solid #e5e7eb;border-radius:18px;border-bottom-left-radius:6px;display:flex;gap:4px;box-shadow:0 1px 2px rgba(15,23,42,.05)}",
    ".typing i{width:7px;height:7px;border-radius:50%;background:#94a3b8;animation:fd-dot 1.2s infinite ease-in-out}",
    ".typing i:nth-child(2){animation-delay:.15s}.typing i:nth-child(3){animation-delay:.3s}",
    "@keyframes fd-dot{0%,60%,100%{transform:none;opacity:.5}30%{transform:translateY(-4px);opacity:1}}",
    ".status{margin:0;padding:7px 14px;background:#fef3c7;color:#78350f;font-size:12.5px;border-top:1px solid #fde68a}",
    ".compose{display:flex;align-items:flex-end;gap:8px;padding:10px 10px 10px 14px;border-top:1px solid #e2e8f0;background:#fff}",
    ".compose textarea{flex:1;resize:none;border:1px solid #e2e8f0;border-radius:20px;padding:9px 14px;max-height:128px;font:inherit;color:inherit;background:#f8fafc;line-height:1.4;outline:none;transition:border-color .15s,background .15s}",
    ".compose textarea:focus{border-color:var(--accent);background:#fff;box-shadow:0 0 0 1px var(--accent)}",
    ".send{flex:none;width:40px;height:40px;border:0;border-radius:50%;background:var(--accent);color:var(--on-accent);display:flex;align-items:center;justify-content:center}",
    ".send:disabled{opacity:.4;cursor:default}",
    ".foot{padding:0 0 8px;background:#fff;text-align:center;font-size:11px;color:#94a3b8}",
    ".sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}",
    "@media (max-width:480px){.panel,.left .panel{inset:0;width:100%;height:100%;border-radius:0}.open .launcher{display:none}.compose textarea{font-size:16px}}",
    "@media (prefers-reduced-motion:reduce){.panel,.typing i,.launcher{animation:none;transition:none}}"
  ].join("\n");

  function build() {
    var host = el("div", { id: "frontdesk-webchat" });
    // Inline !important on the host: page rules cannot reposition or hide it, nor leak inherited styles in.
    host.style.setProperty("all", "initial", "important");
    var shadow = host.attachShadow({ mode: "open" });
    // A constructed stylesheet is not an inline <style>, so a page's CSP style-src does not block it.
    if (shadow.adoptedStyleSheets && window.CSSStyleSheet && CSSStyleSheet.prototype.replaceSync) {
      var sheet = new CSSStyleSheet();
      sheet.replaceSync(CSS);
      shadow.adoptedStyleSheets = [sheet];
    } else shadow.appendChild(el("style", null, CSS));

    var root = ui.root = shadow.appendChild(el("div", { class: "root" }));
    var panel = ui.panel = root.appendChild(el("div", { class: "panel", id: "fd-panel", "data-fd": "panel", role: "dialog", hidden: "" }));
    var head = panel.appendChild(el("div", { class: "head" }));
    ui.avatar = head.appendChild(el("div", { class: "avatar", "aria-hidden": "true" }));
    ui.title = head.appendChild(el("h2", { class: "title" }));
    var close = head.appendChild(el("button", { class: "close", type: "button", "aria-label": "Close chat" }));
    close.innerHTML = ICON_CLOSE;
    close.onclick = function () { setOpen(false); ui.launcher.focus(); };

    // tabindex: the thread scrolls by keyboard too.
    ui.thread = panel.appendChild(el("div", { class: "thread", "data-fd": "thread", role: "log", "aria-live": "polite", tabindex: "0" }));
    ui.greeting = ui.thread.appendChild(el("div", { class: "msg them", "data-fd": "greeting" })).appendChild(el("div", { class: "bubble" }));

    // The typing indicator is the thread's last item: under the newest message, like a reply on its way.
    ui.typing = ui.thread.appendChild(el("div", { class: "typing", "data-fd": "typing", hidden: "" }));
    ui.typing.appendChild(el("span", { class: "sr" }, "Typing\u2026"));
    for (var i = 0; i < 3; i++) ui.typing.appendChild(el("i", { "aria-hidden": "true" }));
    ui.status = panel.appendChild(el("p", { class: "status", "data-fd": "status", role: "status", hidden: "" }));

    var form = panel.appendChild(el("form", { class: "compose" }));
    form.appendChild(el("label", { class: "sr", for: "fd-input" }, "Message"));
    var input = ui.input = form.appendChild(el("textarea", { id: "fd-input", "data-fd": "input", rows: "1", maxlength: "4000", placeholder: "Write a message\u2026" }));
    var sendBtn = ui.send = form.appendChild(el("button", { class: "send", type: "submit", "aria-label": "Send", "data-fd": "send", disabled: "" }));
    sendBtn.innerHTML = ICON_SEND;
    panel.appendChild(el("div", { class: "foot" }, "Powered by Front Desk"));

    var launcher = ui.launcher = root.appendChild(el("button", { class: "launcher", type: "button", "data-fd": "launcher", "aria-controls": "fd-panel", "aria-expanded": "false" }));
    ui.launcherIcon = launcher.appendChild(el("span", { class: "icon" }));
    ui.launcherIcon.innerHTML = ICON_CHAT;
    ui.badge = launcher.appendChild(el("span", { class: "badge", "aria-hidden": "true", hidden: "" }));
    launcher.onclick = function () { setOpen(!isOpen); };

    form.onsubmit = function (ev) { ev.preventDefault(); submit(); };
    input.addEventListener("keydown", function (ev) {
      // Enter sends, Shift+Enter is a new line; not while an input method is composing (CJK, dictation).
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing && ev.keyCode !== 229) { ev.preventDefault(); submit(); }
    });
    input.addEventListener("input", function () {
      sendBtn.disabled = !input.value.trim();
      input.style.height = "auto";
      input.style.height = Math.min(input.scrollHeight + 2, 128) + "px";
      var now = Date.now();
      if (input.value && now - lastTypingAt >= 3000 && socketOpen()) { lastTypingAt = now; frame({ type: "typing" }); }
    });
    root.addEventListener("keydown", function (ev) {   // from the panel or the launcher
      if (ev.key === "Escape" && isOpen) { ev.stopPropagation(); setOpen(false); launcher.focus(); }
    });

    applyConfig(null);
    document.body.appendChild(host);
  }

  function submit() {
    var text = ui.input.value.trim();
    if (!text) return;
    if (Date.now() < blockedUntil) {
      notice("You're sending messages too quickly. Try again in " + Math.ceil((blockedUntil - Date.now()) / 1000) + " s.", 5);
      return;
    }
    ui.input.value = "";
    ui.input.style.height = "";
    ui.send.disabled = true;
    send(text);
  }

  function applyConfig(w) {
    if (w) Object.keys(cfg).forEach(function (k) { if (typeof w[k] === "string" && w[k]) cfg[k] = w[k]; });
    if (!/^#[0-9a-fA-F]{6}$/.test(cfg.color)) cfg.color = "#2563eb";
    if (!ui.root) return;
    ui.root.style.setProperty("--accent", cfg.color);
    ui.root.style.setProperty("--on-accent", textOn(cfg.color));
    ui.root.style.setProperty("--accent-deep", shade(cfg.color, 0.82));
    ui.root.classList.toggle("left", cfg.position === "left");
    ui.title.textContent = cfg.title;
    ui.avatar.textContent = (cfg.title.trim()[0] || "?").toUpperCase();
    ui.panel.setAttribute("aria-label", cfg.title);
    ui.greeting.textContent = cfg.greeting;
    updateBadge();
  }

  // The accent colour darkened to `f` of its brightness: the far end of the header's gradient.
  function shade(hex, f) {
    return "#" + [1, 3, 5].map(function (i) {
      return ("0" + Math.round(parseInt(hex.substr(i, 2), 16) * f).toString(16)).slice(-2);
    }).join("");
  }

  // White or near-black text on the accent colour, whichever contrasts more (WCAG relative luminance).
  function textOn(hex) {
    var c = [1, 3, 5].map(function (i) {
      var v = parseInt(hex.substr(i, 2), 16) / 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    var lum = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
    return 1.05 / (lum + 0.05) >= (lum + 0.05) / 0.061 ? "#ffffff" : "#111827";
  }

  function setOpen(open) {
    isOpen = open;
    ui.panel.hidden = !open;
    ui.root.classList.toggle("open", open);
    ui.launcher.setAttribute("aria-expanded", String(open));
    ui.launcherIcon.innerHTML = open ? ICON_DOWN : ICON_CHAT;
    if (open) {
      openSession(true).catch(sessionFailed);
      scrollDown();
      ui.input.focus();
      markSeen();
    }
    updateBadge();
  }

  // ---- start
  function start() {
    // The look first, so the launcher wears the channel's colour from the start; a stored session resumes at
    // once so replies arrive (and the badge counts them) before the panel is opened.
    api("GET", "/webchat/v1/widget").then(function (j) { applyConfig(j.widget); return true; }, function (err) {
      if (err.status === 404) { console.warn("Front Desk web chat: unknown widget key " + KEY); return false; }
      return true;   // unreachable for now: show the launcher anyway; opening it retries
    }).then(function (show) {
      if (!show) return;
      build();
      listen();
      if (token) openSession(false).catch(sessionFailed);
    });
  }

  function listen() {
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState !== "visible") return;
      markSeen();
      updateBadge();
      if (token && !ws) { attempts = 0; reconnect(); }
    });
    window.addEventListener("online", function () { if (token && !ws) { attempts = 0; reconnect(); } });
    // Another tab started, renewed or lost the session.
    window.addEventListener("storage", function (ev) {
      if (ev.key !== STORE || ev.newValue === token) return;
      reset();
      token = ev.newValue;
      if (token) openSession(false).catch(sessionFailed);
    });
  }

  if (document.body) start(); else document.addEventListener("DOMContentLoaded", start);
})();
