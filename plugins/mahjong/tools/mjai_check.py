"""Feed MJAI logs to the `mjai` package's state tracker (libriichi PlayerState), one per seat.

Run with the interpreter of an isolated venv that has `mjai` (AGPL, pins mahjong~=1.2;
never a meeple dependency):  VENV/bin/python mjai_check.py LOG [LOG ...]
Each seat sees what the mjai server would send it (other seats' deals and draws as "?").
Every event must be accepted, and each seat's own decisions must pass
validate_reaction. With --legal, a LOG's sibling STEM.legal.json (meeple_mahjong.legal_dump)
lists what our engine offered each deciding seat; those flags must equal the tracker's
action candidates after the same event, both ways. Prints one line per log; exit status 1
if any log fails.
"""

import gzip
import json
import os
import sys

from mjai.mlibriichi.state import PlayerState  # type: ignore

_OWN = {"dahai", "chi", "pon", "daiminkan", "ankan", "kakan", "reach", "hora"}


def _masked(ev: dict, seat: int) -> dict:
    ev = dict(ev)
    if ev["type"] == "start_kyoku":
        ev["tehais"] = [h if s == seat else ["?"] * 13 for s, h in enumerate(ev["tehais"])]
    elif ev["type"] == "tsumo" and ev["actor"] != seat:
        ev["pai"] = "?"
    return ev


FLAGS = (
    "can_discard", "can_riichi", "can_tsumo_agari", "can_ron_agari", "can_pon", "can_daiminkan",
    "can_chi_low", "can_chi_mid", "can_chi_high", "can_ankan", "can_kakan", "can_ryukyoku",
)  # fmt: skip


def _ours(path: str) -> dict | None:
    stem = path[: -len(".mjson.gz")] if path.endswith(".mjson.gz") else path[: -len(".mjson")]
    legal = stem + ".legal.json"
    if not os.path.exists(legal):
        return None
    table: dict = {}
    for d in json.load(open(legal)):
        table[(d["event"], d["seat"])] = d["flags"]
    return table


def check(path: str, legal: bool = False) -> str | None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = [json.loads(line) for line in f if line.strip()]
    states = [PlayerState(s) for s in range(4)]
    ours = _ours(path) if legal else None
    if legal and ours is None:
        return "no .legal.json beside the log"

    def validate(seat: int, no: int, ev: dict) -> str | None:
        reaction = {
            k: v
            for k, v in ev.items()
            if k in ("type", "actor", "target", "pai", "consumed", "tsumogiri")
        }
        try:
            verdict = states[seat].validate_reaction(
                json.dumps(reaction)
            )  # raises (or False) if invalid
        except BaseException as e:
            verdict = e
        if verdict is False or isinstance(verdict, BaseException):
            return f"line {no}: seat {seat} state tracker rejects its own {ev['type']}: {verdict}"
        return None

    for i, ev in enumerate(events):
        no = i + 1
        if ev["type"] in ("start_game", "end_game"):
            continue
        claim = ev["type"] in ("chi", "pon", "daiminkan") or (
            ev["type"] == "hora" and ev["actor"] != ev["target"]
        )
        # Own-turn decisions are checked against the candidates of the preceding draw or call;
        # claims were already checked when their discard (or kan) was seen.
        if ev["type"] in _OWN and not claim and (err := validate(ev["actor"], no, ev)):
            return err
        for seat, st in enumerate(states):
            try:
                cans = st.update(json.dumps(_masked(ev, seat)))
            except BaseException as e:  # libriichi panics surface as PanicException
                return f"line {no}: seat {seat} state tracker failed on {ev['type']}: {e}"
            # Our claims window opens after an open kan's dora flip that follows a discard;
            # the tracker's opens at the discard itself.
            dora_next = i + 1 < len(events) and events[i + 1]["type"] == "dora"
            skip = ev["type"] == "reach" or (
                ev["type"] == "dora" and events[i - 1]["type"] == "dahai"
            )
            if ours is not None and not skip:
                key = (i + 1 if ev["type"] == "dahai" and dora_next else i, seat)
                mine = ours.get(key, dict.fromkeys(FLAGS, False))
                theirs = {f: bool(getattr(cans, f)) for f in FLAGS}
                if mine != theirs:
                    diff = {f: (mine[f], theirs[f]) for f in FLAGS if mine[f] != theirs[f]}
                    return (
                        f"line {no}: seat {seat} after {ev['type']}: (ours, tracker) differ {diff}"
                    )
        if ev["type"] in ("dahai", "kakan", "ankan"):
            j = i + 1
            while j < len(events) and events[j]["type"] in ("reach_accepted", "dora"):
                j += 1
            while j < len(events):
                nxt = events[j]
                is_claim = nxt["type"] in ("chi", "pon", "daiminkan") or (
                    nxt["type"] == "hora" and nxt["actor"] != nxt["target"]
                )
                if not is_claim:
                    break
                if err := validate(nxt["actor"], j + 1, nxt):
                    return err
                if nxt["type"] != "hora":
                    break
                j += 1
    return None


def main(args: list[str]) -> int:
    legal = "--legal" in args
    paths = [a for a in args if a != "--legal"]
    bad = 0
    for p in paths:
        err = check(p, legal)
        print(f"{p}: {err or 'ok'}")
        bad += err is not None
    print(f"{len(paths) - bad}/{len(paths)} logs accepted by mjai's state tracker")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
