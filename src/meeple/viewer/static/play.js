// The play page (python -m meeple.play): draws the game with its viewer renderer and sends the
// human's moves to the local server. Only legal moves can be chosen here (board clicks through the
// renderer's optional input() hook, or else one button per legal move); the server checks them again.
// The agent's decisions are shown by the replay viewer's panel (viewer.js: meepleViewer.decisionPanel).
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("play-config").textContent);
  var renderer = (window.meepleRenderers || {})[config.game];
  var board = document.getElementById("board");
  var legalEl = document.getElementById("legal");
  var errorEl = document.getElementById("error");
  var statusEl = document.getElementById("status");
  var decisionEl = document.getElementById("decision");
  var download = document.getElementById("download");
  var current = null;
  var busy = false;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function request(method, path, body) {
    var init = { method: method, headers: { "Content-Type": "application/json" } };
    if (body !== undefined) init.body = JSON.stringify(body);
    return fetch(path, init).then(function (r) {
      return r.json().then(function (data) {
        if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
        return data;
      });
    });
  }

  function submit(id) {
    if (busy || !current) return;
    var ok = current.legal.some(function (m) { return m.id === String(id); });
    if (!ok) { showError("not a legal move here: " + id); return; }
    busy = true;
    statusEl.textContent = "Agent thinking...";
    request("POST", "/api/move", { action: String(id) })
      .then(function (data) { showError(""); show(data); })
      .catch(function (e) { showError(e.message); if (current) show(current); })
      .then(function () { busy = false; });
  }

  function showError(text) { errorEl.textContent = text; }

  // The agent's latest decision (a step with one; else the latest move), then every move the
  // other seats made since yours (bots in between show there).
  function showDecision(last) {
    var decided = last.filter(function (s) { return s.decision; });
    var step = decided.length ? decided[decided.length - 1] : last[last.length - 1];
    if (step) window.meepleViewer.decisionPanel(decisionEl, step);
    else decisionEl.textContent = "(none yet)";
    if (last.length > 1) {
      var list = el("ol", { class: "since" });
      last.forEach(function (s) {
        list.appendChild(el("li", {}, (current.players[s.actor] || "player " + s.actor) + ": " + s.action));
      });
      decisionEl.appendChild(list);
    }
  }

  function show(data) {
    current = data;
    document.getElementById("title").textContent = "Play " + data.game + " (seed " + data.seed + ")";
    var players = document.getElementById("players");
    players.textContent = "";
    data.players.forEach(function (p, i) {
      players.appendChild(el("li", { "data-player": String(i) }, p));
    });
    var last = data.last.length ? data.last[data.last.length - 1] : null;
    var replay = { game: data.game, title: "", players: data.players, steps: [], meta: {}, result: data.result };
    board.textContent = "";
    renderer.draw(board, data.state, last || { state: data.state }, replay);
    board.setAttribute("data-finished", data.finished ? "1" : "0");
    legalEl.textContent = "";
    if (data.legal.length && renderer.input) {
      renderer.input(board, data.state, data.legal, submit);
    } else {  // no board input: one button per legal move
      data.legal.forEach(function (m) {
        var b = el("button", { type: "button", class: "move", "data-action": m.id }, m.label);
        b.addEventListener("click", function () { submit(m.id); });
        legalEl.appendChild(b);
      });
    }
    showDecision(data.last);
    if (data.finished) {
      statusEl.textContent = "Game over: " + (data.result.text || JSON.stringify(data.result));
    } else {
      statusEl.textContent = data.legal.length ? "Your move" : "Waiting";
    }
    download.hidden = !data.finished;
  }

  document.getElementById("new-game").addEventListener("click", function () {
    if (busy) return;
    busy = true;
    request("POST", "/api/new").then(function (data) { showError(""); show(data); })
      .catch(function (e) { showError(e.message); })
      .then(function () { busy = false; });
  });

  if (!renderer) {
    showError("no renderer for " + config.game);
    return;
  }
  request("GET", "/api/state").then(show).catch(function (e) { showError(e.message); });
})();
