/* meeple replay viewer: reads the replay JSON in #replay and builds the page around the game's
   renderer (window.meepleRenderers[game].draw(boardEl, state, step, replay)). Plain ES2017, no
   libraries, no network. */
(function () {
  "use strict";

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }

  function fmt(v) {
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
    if (v === null || v === undefined) return "";
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  function table(cls, data) {
    var rows = Object.keys(data || {}).map(function (k) {
      return el("tr", {}, [el("th", { text: k }), el("td", { text: fmt(data[k]) })]);
    });
    return rows.length ? el("table", { class: cls }, rows) : null;
  }

  function decisionPanel(panel, step) {
    panel.textContent = "";
    var head = el("div", { class: "played" });
    head.appendChild(el("span", { class: "label", text: step.action ? "played: " : "end of game" }));
    if (step.action) head.appendChild(el("strong", { text: step.action }));
    if (step.actor !== null && step.actor !== undefined) {
      head.appendChild(el("span", { class: "actor", text: " (player " + (step.actor + 1) + ")" }));
    }
    panel.appendChild(head);
    (step.marks || []).forEach(function (m) {
      panel.appendChild(el("span", { class: "mark mark-" + m, "data-mark": m, text: m }));
    });
    if (step.note) panel.appendChild(el("p", { class: "note", text: step.note }));
    var d = step.decision;
    if (!d) return;
    if (d.value !== null && d.value !== undefined) {
      panel.appendChild(el("p", { class: "value", text: "value " + d.value.toFixed(3) }));
    }
    var rows = d.top.map(function (c) {
      var pct = (100 * c.p).toFixed(1);
      var bar = el("span", { class: "bar" }, [el("span", { class: "fill", style: "width:" + pct + "%" })]);
      var attrs = { "data-action": c.action };
      if (c.action === step.action) attrs.class = "chosen";
      return el("tr", attrs, [
        el("td", { class: "action", text: c.action }),
        el("td", { class: "p", text: pct + "%" }),
        el("td", {}, [bar]),
        el("td", { class: "visits", text: c.visits === null || c.visits === undefined ? "" : c.visits + " visits" }),
      ]);
    });
    panel.appendChild(el("table", { class: "top" }, rows));
  }

  function mount(root, replay) {
    var draw = (window.meepleRenderers || {})[replay.game];
    var steps = replay.steps;
    var players = replay.players.map(function (p, i) {
      return el("li", { "data-player": String(i), text: p });
    });
    root.appendChild(el("header", {}, [
      el("h1", { text: replay.title }),
      el("ol", { class: "players" }, players),
      table("result", replay.result),
      table("summary", replay.summary),
    ]));
    var board = el("div", { id: "board" });
    var slider = el("input", { id: "slider", type: "range", min: "1", max: String(steps.length), value: "1" });
    var index = el("span", { id: "step-index" });
    var buttons = {};
    ["first", "prev", "next", "last"].forEach(function (id) {
      var labels = { first: "|\u25c0", prev: "\u25c0", next: "\u25b6", last: "\u25b6|" };  // glyphs every font has
      buttons[id] = el("button", { id: id, type: "button", title: id, text: labels[id] });
    });
    var controls = el("nav", { class: "controls" },
      [buttons.first, buttons.prev, slider, buttons.next, buttons.last, index]);
    var panel = el("div", { id: "decision" });
    root.appendChild(el("section", { class: "stage" }, [el("div", { class: "left" }, [board, controls]), panel]));

    var at = 0;
    function show(i) {
      at = Math.max(0, Math.min(steps.length - 1, i));
      var step = steps[at];
      board.textContent = "";
      if (draw) draw.draw(board, step.state, step, replay);
      else board.appendChild(el("pre", { text: JSON.stringify(step.state, null, 1) }));
      index.textContent = (at + 1) + " / " + steps.length;
      slider.value = String(at + 1);
      decisionPanel(panel, step);
      buttons.first.disabled = buttons.prev.disabled = at === 0;
      buttons.next.disabled = buttons.last.disabled = at === steps.length - 1;
    }
    buttons.first.addEventListener("click", function () { show(0); });
    buttons.prev.addEventListener("click", function () { show(at - 1); });
    buttons.next.addEventListener("click", function () { show(at + 1); });
    buttons.last.addEventListener("click", function () { show(steps.length - 1); });
    slider.addEventListener("input", function () { show(Number(slider.value) - 1); });
    document.addEventListener("keydown", function (e) {
      if (e.target === slider) return;  // the slider steps itself (its input event)
      if (e.key === "ArrowLeft") show(at - 1);
      else if (e.key === "ArrowRight") show(at + 1);
    });
    if (steps.length) show(0);
    return { show: show, current: function () { return at; } };
  }

  window.meepleViewer = { mount: mount, decisionPanel: decisionPanel, el: el };
  var data = document.getElementById("replay");
  var root = document.getElementById("viewer");
  if (data && root) window.meepleViewer.current = mount(root, JSON.parse(data.textContent));
})();
