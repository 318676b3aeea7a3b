/* Connect Four for the meeple viewer: a 6 x 7 grid of cells (data-row 0 = top, data-col 0..6,
   data-piece 0 empty / 1 first player / 2 second player); the last stone is outlined. */
(function () {
  "use strict";
  window.meepleRenderers = window.meepleRenderers || {};

  function grid(boardEl, state) {
    var wrap = document.createElement("div");
    wrap.className = "c4";
    var cols = state.cells[0].length;
    var lastRow = -1;
    if (state.last !== null && state.last !== undefined) {
      for (var r = 0; r < state.cells.length && lastRow < 0; r++) if (state.cells[r][state.last]) lastRow = r;
    }
    for (var c = 0; c < cols; c++) {
      var head = document.createElement("div");
      head.className = "c4-head";
      head.setAttribute("data-col", String(c));
      head.textContent = String(c + 1);
      wrap.appendChild(head);
    }
    state.cells.forEach(function (row, r) {
      row.forEach(function (piece, c) {
        var cell = document.createElement("div");
        cell.className = "c4-cell" + (r === lastRow && c === state.last ? " last" : "");
        cell.setAttribute("data-row", String(r));
        cell.setAttribute("data-col", String(c));
        cell.setAttribute("data-piece", String(piece));
        wrap.appendChild(cell);
      });
    });
    boardEl.appendChild(wrap);
    return wrap;
  }

  window.meepleRenderers.connect4 = {
    draw: function (boardEl, state) { grid(boardEl, state); },
    // play page: a click on a column (any cell or its number) submits that column if legal
    input: function (boardEl, state, legal, submit) {
      var byCol = {};
      legal.forEach(function (m) { byCol[m.id] = m; });
      boardEl.querySelectorAll("[data-col]").forEach(function (node) {
        var move = byCol[node.getAttribute("data-col")];
        if (!move) return;
        node.classList.add("playable");
        node.title = move.label;
        node.addEventListener("click", function () { submit(move.id); });
      });
    },
  };
})();
