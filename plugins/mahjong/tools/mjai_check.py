"""Feed MJAI logs to the `mjai` package's state tracker (libriichi PlayerState), one per seat.

Run with the interpreter of an isolated venv that has `mjai` (AGPL, pins mahjong~=1.2;
never a meeple dependency):  VENV/bin/python mjai_check.py LOG [LOG ...]
Each seat sees what the mjai server would send it (other seats' deals and draws as "?").
Every event must be accepted, and each seat's own decisions must pass
validate_reaction. Prints one line per log; exit status 1 if any log fails.
"""

import gzip
import json
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


def check(path: str) -> str | None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = [json.loads(line) for line in f if line.strip()]
    states = [PlayerState(s) for s in range(4)]

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
                st.update(json.dumps(_masked(ev, seat)))
            except BaseException as e:  # libriichi panics surface as PanicException
                return f"line {no}: seat {seat} state tracker failed on {ev['type']}: {e}"
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


def main(paths: list[str]) -> int:
    bad = 0
    for p in paths:
        err = check(p)
        print(f"{p}: {err or 'ok'}")
        bad += err is not None
    print(f"{len(paths) - bad}/{len(paths)} logs accepted by mjai's state tracker")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
