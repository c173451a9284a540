"""The order completions are offered in: what a beginner most likely means
first, since Tab takes the first entry.

jedi lists names alphabetically, so after `random.ra` its first entry was
`randbytes`, which beginners never mean. Here, in this order:

1. private names (`_random`, `__doc__`) are left out unless the student
   has typed a `_`;
2. the student's own names (defined in the file or its modules) come
   first, in the order jedi gives them;
3. then the names classes use most (COMMON, by how common they are);
4. then functions, classes, keywords and modules; then everything else;
   constants (`BPF`, `LOG4`: names in capitals) last.

Runs in the assist process (it is copied into its jail): plain Python, no
server imports.
"""

# Names a Python class uses most, most common first: built-ins, string and
# list methods, then the modules a lesson imports (random, math, time,
# turtle, matplotlib, numpy). A name ranks by its first place here whatever
# it belongs to: a beginner after `x.ap` means `append` wherever it is.
COMMON = """
print input int str float len range list dict set tuple bool sum min max abs round sorted enumerate zip
open type isinstance append split join strip lower upper replace format count index insert remove pop
sort reverse extend keys values items get startswith endswith find isdigit isalpha title capitalize
randint choice random randrange shuffle uniform sample seed
sqrt pi floor ceil pow sin cos tan radians degrees log exp factorial gcd hypot inf
sleep time perf_counter
plot show title xlabel ylabel legend scatter bar hist figure subplot subplots grid xlim ylim savefig pie axis
array arange linspace mean zeros ones reshape median std
forward backward left right penup pendown goto color speed circle done shape setheading
write read readline readlines close
return import from def class while for if elif else True False None and or not in is break continue pass
""".split()
_PLACE = {}
for _at, _name in enumerate(COMMON):
    _PLACE.setdefault(_name, _at)

_KINDS = {"function": 0, "class": 0, "keyword": 1, "module": 2}


def is_constant(name):
    """`BPF`, `LOG4`, `MAX_SIZE`: capitals (and digits, underscores) only."""
    return len(name) > 1 and name.isupper()


def rank(names, typed, own):
    """The indexes of `names` (each (name, kind) in jedi's order) in the order
    to offer them, private ones left out unless `typed` starts with `_`;
    `own(i)` tells whether the i-th is the student's own."""
    keep = [i for i, (name, _) in enumerate(names) if typed.startswith("_") or not name.startswith("_")]

    def key(i):
        name, kind = names[i]
        if own(i):
            return (0, 0, i)
        if name in _PLACE:
            return (1, _PLACE[name], i)
        return (3 if is_constant(name) else 2, _KINDS.get(kind, 3), i)

    return sorted(keep, key=key)
