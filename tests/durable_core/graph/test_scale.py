"""10,000 trivial nodes, as a chain and as a wide fan-out: correct (G-4, G-7).

How the cost grows with the number of nodes is measured in benchmarks/ (engine_overhead.py,
growth.py), not timed here.
"""

from durable_core import Graph, Key, execute

COUNT = 10_000


def chain(count, sync):
    keys = [Key(f"k{i}", int) for i in range(count + 1)]
    g = Graph("chain", inputs=[keys[0]])
    for i in range(count):
        src, dst = keys[i], keys[i + 1]
        if sync:

            def body(rc, src=src, dst=dst):
                rc.set(dst, rc.get(src) + 1)

        else:

            async def body(rc, src=src, dst=dst):
                rc.set(dst, rc.get(src) + 1)

        g.add_node(f"n{i}", body, requires=[src], provides=[dst])
    return g, keys


def fan_out(count):
    seed = Key("seed", int)
    g = Graph("fan", inputs=[seed])
    outs = []
    for i in range(count):
        out = Key(f"o{i}", int)
        outs.append(out)

        async def body(rc, out=out, i=i):
            rc.set(out, rc.get(seed) + i)

        g.add_node(f"n{i}", body, requires=[seed], provides=[out])
    total = Key("total", int)

    @g.node("sum", requires=outs, provides=[total])
    async def sum_all(rc):
        rc.set(total, sum(rc.get(k) for k in outs))

    return g, seed, total


# covers: G-4, G-7
def test_a_chain_of_ten_thousand_async_nodes():
    g, keys = chain(COUNT, sync=False)
    result = execute(g, {keys[0]: 0})
    assert result.status == "completed"
    assert result[keys[-1]] == COUNT


# covers: G-4, G-7
def test_a_chain_of_ten_thousand_plain_nodes():
    g, keys = chain(COUNT, sync=True)
    result = execute(g, {keys[0]: 5}, max_running=4)
    assert result.status == "completed"
    assert result[keys[-1]] == COUNT + 5


# covers: G-4, G-7
def test_a_fan_out_of_ten_thousand_nodes_and_a_fan_in():
    g, seed, total = fan_out(COUNT)
    result = execute(g, {seed: 1}, max_running=64)
    assert result.status == "completed"
    assert result[total] == COUNT + COUNT * (COUNT - 1) // 2
