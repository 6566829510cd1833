"""The processes of a job, from /proc: what the launcher and soak tests
kill and wait for."""
import os


def _stat_fields(pid):
    """/proc/PID/stat's fields after the command name, which is in
    parentheses and may hold spaces: [state, parent pid, ...]."""
    with open("/proc/%s/stat" % pid) as stat:
        return stat.read().rsplit(")", 1)[1].split()


def descendants(pid):
    """Every process under `pid`, by the parent links."""
    tree = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(_stat_fields(entry)[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid):
    """True while `pid` runs (a zombie has ended)."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except (OSError, IndexError):
        return False
