/* Chess for the meeple viewer: the FEN's board as 64 squares (data-square "a1".."h8", data-piece
   the FEN letter, "" when empty), Unicode pieces, white at the bottom; the last move's squares and
   a king in check are highlighted. */
(function () {
  "use strict";
  window.meepleRenderers = window.meepleRenderers || {};
  var GLYPH = { K: "\u2654", Q: "\u2655", R: "\u2656", B: "\u2657", N: "\u2658", P: "\u2659",
                k: "\u265a", q: "\u265b", r: "\u265c", b: "\u265d", n: "\u265e", p: "\u265f" };
  var FILES = "abcdefgh";

  function pieces(fen) {  // square name -> FEN letter
    var at = {};
    fen.split(" ")[0].split("/").forEach(function (row, i) {
      var file = 0;
      row.split("").forEach(function (ch) {
        if (/[1-8]/.test(ch)) file += Number(ch);
        else { at[FILES[file] + (8 - i)] = ch; file += 1; }
      });
    });
    return at;
  }

  function draw(boardEl, state) {
    var at = pieces(state.fen);
    var from = state.last ? state.last.slice(0, 2) : null;
    var to = state.last ? state.last.slice(2, 4) : null;
    var king = state.to_play === 0 ? "K" : "k";
    var wrap = document.createElement("div");
    wrap.className = "chess";
    for (var rank = 8; rank >= 1; rank--) {
      for (var f = 0; f < 8; f++) {
        var name = FILES[f] + rank;
        var piece = at[name] || "";
        var sq = document.createElement("div");
        sq.className = "sq " + ((f + rank) % 2 ? "dark" : "light") +
          (name === from || name === to ? " last" : "") + (state.check && piece === king ? " check" : "");
        sq.setAttribute("data-square", name);
        sq.setAttribute("data-piece", piece);
        sq.textContent = piece ? GLYPH[piece] : "";
        if (f === 0) sq.appendChild(label("rank", String(rank)));
        if (rank === 1) sq.appendChild(label("file", FILES[f]));
        wrap.appendChild(sq);
      }
    }
    boardEl.appendChild(wrap);
  }

  function label(cls, text) {
    var span = document.createElement("span");
    span.className = "coord " + cls;
    span.textContent = text;
    return span;
  }

  // play page: click a piece with legal moves, then its target square (a promotion takes the
  // queen unless only other pieces are legal); legal ids are UCI moves
  function input(boardEl, state, legal, submit) {
    var selected = null;
    var squares = boardEl.querySelectorAll("[data-square]");
    function mark() {
      squares.forEach(function (sq) {
        var name = sq.getAttribute("data-square");
        var movable = legal.some(function (m) { return m.id.slice(0, 2) === name; });
        var target = selected && legal.some(function (m) { return m.id.slice(0, 4) === selected + name; });
        sq.classList.toggle("playable", movable || Boolean(target));
        sq.classList.toggle("selected", name === selected);
        sq.classList.toggle("target", Boolean(target));
      });
    }
    squares.forEach(function (sq) {
      sq.addEventListener("click", function () {
        var name = sq.getAttribute("data-square");
        if (selected) {
          var moves = legal.filter(function (m) { return m.id.slice(0, 4) === selected + name; });
          if (moves.length) {
            var queen = moves.filter(function (m) { return m.id.length < 5 || m.id[4] === "q"; });
            submit((queen[0] || moves[0]).id);
            return;
          }
        }
        selected = legal.some(function (m) { return m.id.slice(0, 2) === name; }) ? name : null;
        mark();
      });
    });
    mark();
  }

  window.meepleRenderers.chess = { draw: draw, input: input };
})();
