"""The benchmark workflows of `prose_benches` in LangGraph, for the side-by-side comparison
(`side_by_side.sh`). Each session is a call to LangChain's fake chat model, as prosevm's
mock driver answers at once.

    python workflows.py chain N   # session_chain(N): one session, then N more, each given
                                  # the previous answer as context
    python workflows.py fan N     # fan_out(N): N sessions side by side (Send), then one
                                  # session joining their answers
"""

import operator
import sys
from typing import Annotated, TypedDict

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

model = FakeListChatModel(responses=["ok"])


def ask(task, context=None):
    text = task if context is None else f"{context}\n\n{task}"
    return model.invoke([HumanMessage(content=text)]).content


class Chain(TypedDict):
    prev: str
    i: int


def chain(n):
    g = StateGraph(Chain)
    g.add_node("start", lambda s: {"prev": ask("Start the chain"), "i": 0})
    g.add_node(
        "step",
        lambda s: {"prev": ask("Continue the chain", s["prev"]), "i": s["i"] + 1},
    )
    g.add_edge(START, "start")
    g.add_conditional_edges("start", lambda s: "step" if n > 0 else END)
    g.add_conditional_edges("step", lambda s: "step" if s["i"] < n else END)
    out = g.compile().invoke({"prev": "", "i": 0}, {"recursion_limit": n + 10})
    assert out["i"] == n, out["i"]
    return out["prev"]


class Fan(TypedDict):
    items: list
    results: Annotated[list, operator.add]
    joined: str


def fan(n):
    def join(s):
        assert len(s["results"]) == n, len(s["results"])
        return {"joined": ask("Join the results", "\n".join(s["results"]))}

    g = StateGraph(Fan)
    g.add_node("items", lambda s: {"items": list(range(n))})
    g.add_node("work", lambda s: {"results": [ask(f"Work on item {s['item']}")]})
    g.add_node("join", join)
    g.add_edge(START, "items")
    g.add_conditional_edges(
        "items", lambda s: [Send("work", {"item": i}) for i in s["items"]] or "join"
    )
    g.add_edge("work", "join")
    g.add_edge("join", END)
    return g.compile().invoke({"items": [], "results": [], "joined": ""})["joined"]


if __name__ == "__main__":
    kind, n = sys.argv[1], int(sys.argv[2])
    print((chain if kind == "chain" else fan)(n))
