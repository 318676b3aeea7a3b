/* Auto-battler for the meeple viewer: the seat's stats, its board (2 rows x 8 cells, data-cell
   0..15), bench (data-bench 0..3) and shop (data-shop 0..4), each unit with data-kind and
   data-star, the last fight's outcome and the other players' health. */
(function () {
  "use strict";
  window.meepleRenderers = window.meepleRenderers || {};
  var TYPES = ["ember", "tide", "stone", "gale"];

  function node(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function slot(kind, index, unit) {
    var cell = node("div", "ab-slot" + (unit ? " ab-type-" + TYPES[unit.kind % 4] : ""));
    cell.setAttribute("data-" + kind, String(index));
    if (unit) {
      cell.setAttribute("data-kind", String(unit.kind));
      cell.setAttribute("data-star", String(unit.star));
      cell.title = unit.name + " (tier " + unit.tier + ")";
      cell.appendChild(node("span", "ab-name", unit.name));
      cell.appendChild(node("span", "ab-star", "\u2605".repeat(unit.star)));
      cell.appendChild(node("span", "ab-tier", "T" + unit.tier));
    }
    return cell;
  }

  function row(title, kind, units, cls) {
    var wrap = node("div", "ab-row " + cls);
    wrap.appendChild(node("div", "ab-label", title));
    var grid = node("div", "ab-grid");
    units.forEach(function (u, i) { grid.appendChild(slot(kind, i, u)); });
    wrap.appendChild(grid);
    return wrap;
  }

  function draw(boardEl, state) {
    var root = node("div", "ab");
    root.appendChild(node("div", "ab-stats", "round " + state.round + " \u00b7 " + state.hp + " hp \u00b7 " +
      state.gold + " gold \u00b7 level " + state.level));
    var f = state.fight;
    var outcome = f.won ? "won" : f.lost ? "lost" : f.draw ? "draw" : "";
    if (outcome) {
      var line = node("div", "ab-fight ab-fight-" + outcome, "last fight " + outcome + ": -" + f.hp_lost +
        " hp taken, -" + f.hp_dealt + " hp dealt, " + f.survivors + " survivors" + (f.ghost ? " (ghost)" : ""));
      line.setAttribute("data-fight", outcome);
      root.appendChild(line);
    }
    root.appendChild(row("board", "cell", state.board, "ab-board"));
    root.appendChild(row("bench", "bench", state.bench, "ab-bench"));
    root.appendChild(row("shop", "shop", state.shop, "ab-shop"));
    var others = node("ol", "ab-others");
    state.others.forEach(function (o, i) {
      var li = node("li", o.alive ? "" : "ab-out",
        "seat +" + (i + 1) + ": " + (o.alive ? o.hp + " hp, level " + o.level : "out, place " + o.place));
      li.setAttribute("data-other", String(i + 1));
      others.appendChild(li);
    });
    root.appendChild(others);
    boardEl.appendChild(root);
  }

  window.meepleRenderers.autobattler = { draw: draw };
})();
