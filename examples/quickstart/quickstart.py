"""The smallest Durable graph: one input, one node, one output."""

from durable_core.graph import Graph, Key

NAME = Key("name", str)
GREETING = Key("greeting", str)

graph = Graph("quickstart", inputs=[NAME])


@graph.node("greet", requires=[NAME], provides=[GREETING])
def greet(rc):
    rc.set(GREETING, f"Hello, {rc.get(NAME)}!")
