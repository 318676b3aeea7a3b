/* meeple mahjong renderer: draws the table state of meeple_mahjong.viewer.table (hands, rivers,
   melds, dora indicators, scores, round, honba, riichi sticks, tiles left, the hand's result).
   Tiles are styled text (no images, no fonts: the page loads nothing) carrying data-tile in MJAI
   notation ("5mr", "E"), inside .hand[data-seat=N], .river[data-seat=N], .melds[data-seat=N].
   Plain ES2017, registered as window.meepleRenderers.mahjong. */
(function () {
  "use strict";

  var WINDS = ["E", "S", "W", "N"];
  var HONORS = { E: "East", S: "South", W: "West", N: "North", P: "White", F: "Green", C: "Red" };
  var SUITS = { m: "man", p: "pin", s: "sou" };
  // Where each seat sits, relative to the seat at the bottom (the next seat plays to its right).
  var PLACES = ["bottom", "right", "top", "left"];

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function tileName(t) {
    if (HONORS[t]) return HONORS[t] + (("PFC").indexOf(t) >= 0 ? " dragon" : " wind");
    var suit = SUITS[t.charAt(1)];
    return suit ? t.charAt(0) + " " + suit + (t.charAt(2) === "r" ? " (red five)" : "") : t;
  }

  /* One tile: data-tile is the MJAI name; the face is its number and suit letter (or the honor's
     letter), coloured by suit; a red five is red. `extra` adds classes (riichi, called, ...). */
  function tile(t, extra) {
    var node = el("span", "tile" + (extra ? " " + extra : ""));
    if (t === null || t === undefined || t === "?") {
      node.className += " back";
      node.setAttribute("data-tile", "?");
      return node;
    }
    node.setAttribute("data-tile", t);
    node.title = tileName(t);
    if (HONORS[t]) {
      node.className += " honor honor-" + t;
      node.appendChild(el("span", "rank", t === "P" ? "\u00a0" : t));
    } else {
      node.className += " suit-" + t.charAt(1) + (t.charAt(2) === "r" ? " red" : "");
      node.appendChild(el("span", "rank", t.charAt(0)));
      node.appendChild(el("span", "suit", t.charAt(1)));
    }
    return node;
  }

  function hand(seat, tiles, drawn, winner) {
    var row = el("div", "hand");
    row.setAttribute("data-seat", String(seat));
    if (typeof tiles === "number") { // hidden: backs only
      for (var i = 0; i < tiles; i++) row.appendChild(tile(null));
    } else {
      tiles.forEach(function (t) { row.appendChild(tile(t)); });
    }
    if (drawn) row.appendChild(tile(drawn, "drawn" + (winner ? " winning" : "")));
    return row;
  }

  function river(seat, discards, last) {
    var box = el("div", "river");
    box.setAttribute("data-seat", String(seat));
    discards.forEach(function (d, i) {
      var cls = [d.riichi ? "riichi" : "", d.called ? "called" : "", d.tsumogiri ? "tsumogiri" : "",
        last && i === discards.length - 1 ? "last" : ""].filter(Boolean).join(" ");
      box.appendChild(tile(d.pai, cls));
    });
    return box;
  }

  function melds(seat, list) {
    var box = el("div", "melds");
    box.setAttribute("data-seat", String(seat));
    list.forEach(function (m) {
      var group = el("span", "meld meld-" + m.type);
      group.setAttribute("data-meld", m.type);
      if (m.type === "ankan") { // a closed kan shows its two middle tiles face down
        m.consumed.forEach(function (t, i) { group.appendChild(i === 0 || i === 3 ? tile(t) : tile(null)); });
      } else {
        m.consumed.forEach(function (t) { group.appendChild(tile(t)); });
        if (m.type !== "kakan") group.appendChild(tile(m.pai, "claimed"));
      }
      box.appendChild(group);
    });
    return box;
  }

  function seatWind(state, seat) { return WINDS[(seat - state.oya + 4) % 4]; }

  function seatPanel(state, seat, place, names, wins) {
    var panel = el("div", "seat seat-" + place);
    panel.setAttribute("data-seat", String(seat));
    var won = wins.some(function (w) { return w.actor === seat; });
    var paid = wins.some(function (w) { return !w.tsumo && w.target === seat; });
    if (won) panel.className += " winner";
    if (paid) panel.className += " dealt-in";
    if (state.pov === seat) panel.className += " pov";
    var head = el("div", "seat-head");
    head.appendChild(el("span", "wind" + (seat === state.oya ? " dealer" : ""), seatWind(state, seat)));
    head.appendChild(el("span", "name", names[seat] !== undefined ? names[seat] : "seat " + seat));
    var score = el("span", "score", state.scores[seat]);
    score.setAttribute("data-score", String(state.scores[seat]));
    head.appendChild(score);
    if (state.riichi[seat]) head.appendChild(el("span", "riichi-stick", "riichi"));
    if (won) head.appendChild(el("span", "badge badge-win", "win"));
    if (paid) head.appendChild(el("span", "badge badge-deal-in", "deal-in"));
    var last = state.last && state.last.actor === seat && state.last.type === "dahai";
    panel.appendChild(head);
    panel.appendChild(river(seat, state.rivers[seat], last));
    var row = el("div", "hand-row");
    row.appendChild(hand(seat, state.hands[seat], state.drawn[seat], won));
    row.appendChild(melds(seat, state.melds[seat]));
    panel.appendChild(row);
    return panel;
  }

  function yakuText(w) {
    var yaku = (w.yakus || []).map(function (y) { return y[0] + " " + y[1]; }).join(", ");
    var pts = w.hora_points !== undefined ? w.hora_points + " points" : "";
    var fanfu = w.fan !== undefined ? w.fan + " han " + w.fu + " fu" : "";
    return [yaku, fanfu, pts].filter(Boolean).join(" \u00b7 ");
  }

  function resultBox(state, names) {
    var r = state.result;
    if (!r) return null;
    var box = el("div", "result");
    box.setAttribute("data-result", r.type);
    if (r.type === "hora") {
      r.wins.forEach(function (w) {
        var line = names[w.actor] + (w.tsumo ? " wins by tsumo" : " wins by ron from " + names[w.target]);
        var p = el("p", "win-line", line + (w.pai ? " on " : ""));
        if (w.pai) p.appendChild(tile(w.pai, "winning"));
        box.appendChild(p);
        box.appendChild(el("p", "yaku", yakuText(w)));
        if (w.uradora) {
          var ura = el("p", "ura", "ura indicators ");
          w.uradora.forEach(function (t) { ura.appendChild(tile(t)); });
          box.appendChild(ura);
        }
      });
    } else {
      box.appendChild(el("p", "draw-line", "draw" + (r.reason ? " (" + r.reason + ")" : "")));
    }
    var deltas = (r.type === "hora" ? r.wins[r.wins.length - 1].deltas : r.deltas) || [];
    if (r.type === "hora" && r.wins.length > 1) { // a double ron: the sum of the payments
      deltas = [0, 1, 2, 3].map(function (s) {
        return r.wins.reduce(function (a, w) { return a + ((w.deltas || [])[s] || 0); }, 0);
      });
    }
    if (deltas.length) {
      box.appendChild(el("p", "deltas", deltas.map(function (d, s) {
        return names[s] + " " + (d > 0 ? "+" : "") + d;
      }).join("  ")));
    }
    return box;
  }

  function center(state) {
    var box = el("div", "center");
    var round = el("div", "round", state.bakaze + state.kyoku);
    round.setAttribute("data-round", state.bakaze + state.kyoku);
    box.appendChild(round);
    var sticks = el("div", "sticks", state.honba + " honba \u00b7 " + state.kyotaku + " riichi");
    sticks.setAttribute("data-honba", String(state.honba));
    sticks.setAttribute("data-kyotaku", String(state.kyotaku));
    box.appendChild(sticks);
    var wall = el("div", "wall", state.wall + " tiles left");
    wall.setAttribute("data-wall", String(state.wall));
    box.appendChild(wall);
    var dora = el("div", "dora");
    dora.appendChild(el("span", "label", "dora "));
    state.dora.forEach(function (t) { dora.appendChild(tile(t)); });
    box.appendChild(dora);
    return box;
  }

  /* The decision's tiles on the hand: what was played and what the policy liked best. */
  function markDecision(board, step) {
    var d = step.decision;
    if (!d || step.actor === null || step.actor === undefined) return;
    var tiles = board.querySelectorAll('.hand[data-seat="' + step.actor + '"] .tile');
    function mark(label, cls) {
      var m = /^(?:discard|riichi) (\S+)$/.exec(label || "");
      if (!m) return;
      for (var i = tiles.length - 1; i >= 0; i--) { // the drawn tile (last) first
        if (tiles[i].getAttribute("data-tile") === m[1]) { tiles[i].className += " " + cls; return; }
      }
    }
    mark(step.action, "played");
    if (d.top.length) mark(d.top[0].action, "preferred");
  }

  /* A review: buttons to the previous / next step marked "disagree" (the core viewer's show()). */
  function reviewNav(replay) {
    if (!replay || !replay.steps) return null;
    if (!replay._disagree) {
      replay._disagree = [];
      replay.steps.forEach(function (s, i) { if ((s.marks || []).indexOf("disagree") >= 0) replay._disagree.push(i); });
    }
    var marked = replay._disagree;
    if (!marked.length) return null;
    var nav = el("div", "review-nav");
    function go(dir) {
      var viewer = window.meepleViewer && window.meepleViewer.current;
      if (!viewer) return;
      var at = viewer.current();
      var next = dir > 0 ? marked.filter(function (i) { return i > at; })[0]
        : marked.filter(function (i) { return i < at; }).pop();
      if (next !== undefined) viewer.show(next);
    }
    [["prev-disagree", "\u25c0 disagreement", -1], ["next-disagree", "disagreement \u25b6", 1]].forEach(function (b) {
      var button = el("button", "nav", b[1]);
      button.type = "button";
      button.setAttribute("data-nav", b[0]);
      button.addEventListener("click", function () { go(b[2]); });
      nav.appendChild(button);
    });
    nav.appendChild(el("span", "count", marked.length + " disagreements"));
    return nav;
  }

  function draw(board, state, step, replay) {
    var names = (replay && replay.players) || ["0", "1", "2", "3"];
    var bottom = state.pov === null || state.pov === undefined ? 0 : state.pov;
    var wins = state.result && state.result.type === "hora" ? state.result.wins : [];
    var table = el("div", "mahjong-table");
    for (var r = 0; r < 4; r++) {
      var seat = (bottom + r) % 4;
      table.appendChild(seatPanel(state, seat, PLACES[r], names, wins));
    }
    var mid = center(state);
    var res = resultBox(state, names);
    if (res) mid.appendChild(res);
    table.appendChild(mid);
    board.appendChild(table);
    var nav = reviewNav(replay);
    if (nav) board.appendChild(nav);
    if (step) markDecision(board, step);
  }

  /* The play page: the human's legal discards are its clickable hand tiles; every other legal
     move (riichi, calls, wins, pass) is a button. */
  function input(board, state, legal, submit) {
    var seat = state.pov === null || state.pov === undefined ? 0 : state.pov;
    var tiles = board.querySelectorAll('.hand[data-seat="' + seat + '"] .tile');
    var bar = el("div", "moves");
    (legal || []).forEach(function (m) {
      var d = /^discard (\S+)$/.exec(m.label);
      if (d) {
        for (var i = tiles.length - 1; i >= 0; i--) {
          if (tiles[i].getAttribute("data-tile") === d[1] && !tiles[i].getAttribute("data-action")) {
            tiles[i].setAttribute("data-action", m.id);
            tiles[i].className += " legal";
            tiles[i].addEventListener("click", function () { submit(m.id); });
            return;
          }
        }
      }
      var b = el("button", "move", m.label);
      b.type = "button";
      b.setAttribute("data-action", m.id);
      b.addEventListener("click", function () { submit(m.id); });
      bar.appendChild(b);
    });
    board.appendChild(bar);
  }

  window.meepleRenderers = window.meepleRenderers || {};
  window.meepleRenderers.mahjong = { draw: draw, input: input, tile: tile };
})();
