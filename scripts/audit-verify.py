#!/usr/bin/env python3
"""Verify an `audit export` of graph-engineering-mcp without Go.

Usage: python3 scripts/audit-verify.py [--expect ENTRIES:EVENTS:HASH]...
           [--anchor ANCHOR_FILE]... [FILE]
       (FILE defaults to standard input)

Recomputes every hash of the export (JSON Lines, see MCP.md, "Audit trail
format"): each event in its hash format (v1: Go encoding/json after
prev_hash and a newline; v2: RFC 8785 canonical JSON), every workflow chain's
positions and links, the database-wide audit chain's entries and links, and
that the workflows the audit chain records as live are exactly the workflows
that have events. With --expect (a head printed by `audit head`) it also
checks that the export extends that head. With --anchor (a file appended by
`serve --audit-anchor`) it checks every database-wide head in it the same
way, and each workflow's latest head (a line "TIME workflow ID EVENTS:HASH"):
event EVENTS of workflow ID must still have HASH, unless the audit chain
records the workflow's prune with at least that many events. Python 3
standard library only.

The export has no task or workflow rows, so the checks of stored rows
against the chains (a task's state, result, payload and creation columns,
a workflow's stored head) are made only by `audit verify`: MCP.md, "What
the export lets an outside verifier check".

Exit status: 0 when everything verifies, 1 naming the first broken item,
2 on bad usage or unreadable input.
"""

import decimal
import hashlib
import json
import re
import sys


class Broken(Exception):
    pass


def jcs_string(s):
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == '\\':
            out.append('\\\\')
        elif o < 0x20:
            out.append({8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r'}.get(o, '\\u%04x' % o))
        else:
            out.append(ch)
    out.append('"')
    return ''.join(out)


def utf16_key(s):
    return s.encode('utf-16-be')


def jcs_number(f):
    """A double as ECMAScript's Number::toString writes it (RFC 8785
    3.2.2.3): the shortest round-trip digits (Python's repr), as an integer
    up to 21 digits, a plain fraction down to 1e-6, else exponential."""
    if f != f or f in (float('inf'), float('-inf')):
        raise Broken('%r is not a JSON number' % (f,))
    if f == 0:
        return '0'
    sign = '-' if f < 0 else ''
    d = decimal.Decimal(repr(abs(f))).normalize()
    _, digits, exp = d.as_tuple()
    digits = ''.join(str(x) for x in digits)
    k = len(digits)
    n = k + exp  # the decimal point's position relative to the digits
    if k <= n <= 21:
        out = digits + '0' * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + '.' + digits[n:]
    elif -6 < n <= 0:
        out = '0.' + '0' * -n + digits
    else:
        out = digits[0] + ('.' + digits[1:] if k > 1 else '') + 'e' + ('+' if n - 1 > 0 else '-') + str(abs(n - 1))
    return sign + out


def jcs(v):
    """RFC 8785 canonical JSON of a parsed value (integers as the store writes them)."""
    if v is None:
        return 'null'
    if v is True:
        return 'true'
    if v is False:
        return 'false'
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return jcs_number(v)
    if isinstance(v, str):
        return jcs_string(v)
    if isinstance(v, list):
        return '[' + ','.join(jcs(x) for x in v) + ']'
    if isinstance(v, dict):
        return '{' + ','.join(jcs_string(k) + ':' + jcs(v[k]) for k in sorted(v, key=utf16_key)) + '}'
    raise Broken('unsupported JSON value %r' % (v,))


def go_string(s):
    """A string as Go's encoding/json writes it (HTML-safe escaping)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == '\\':
            out.append('\\\\')
        elif o < 0x20:
            out.append({8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r'}.get(o, '\\u%04x' % o))
        elif ch in '<>&' or o in (0x2028, 0x2029):
            out.append('\\u%04x' % o)
        else:
            out.append(ch)
    out.append('"')
    return ''.join(out)


def go_raw(text):
    """A stored JSON text as Go's json.Marshal embeds a RawMessage."""
    for a, b in (('<', '\\u003c'), ('>', '\\u003e'), ('&', '\\u0026'), ('\u2028', '\\u2028'), ('\u2029', '\\u2029')):
        text = text.replace(a, b)
    return text


def sha256_hex(s):
    return hashlib.sha256(s.encode('utf-8')).hexdigest()


def event_hash(e):
    v = e.get('v')
    if v == 1:
        pre = (e['prev_hash'] + '\n' + '{"at_ms":%d,"detail":%s,"generation":%d,"kind":%s,"owner":%s,"seq":%d,"task_id":%s,"workflow_id":%s}' % (
            e['at_ms'], go_raw(e['detail_json']), e['generation'], go_string(e['kind']), go_string(e['owner']),
            e['seq'], go_string(e['task_id']), go_string(e['workflow_id'])))
        return sha256_hex(pre)
    if v == 2:
        obj = {k: x for k, x in e.items() if k != 'hash'}
        return sha256_hex(jcs(obj))
    raise Broken('unknown hash version %r' % (v,))


def audit_hash(a):
    obj = {k: x for k, x in a.items() if k not in ('hash', 'chain')}
    return sha256_hex(jcs(obj))


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise Broken('duplicate key %r' % k)
        d[k] = v
    return d


HEAD = re.compile(r'^([0-9]{1,18}):([0-9]{1,18}):([0-9a-f]{64}|)$')
TIME = re.compile(r'^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$')
WF_HEAD = re.compile(r'^(\S{1,128}) ([0-9]{1,18}):([0-9a-f]{64})$')


def read_anchor(path):
    """Returns the database-wide heads and, per workflow, the anchored head
    with the most events, of an anchor file."""
    heads, wf_heads = [], {}
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip('\n')
            if not line or line.startswith('#'):
                continue
            parts = line.split(' ')
            if len(parts) >= 2 and parts[1] == 'workflow' or parts[0] == 'workflow':
                rest = parts[2:] if parts[0] != 'workflow' else parts[1:]
                m = WF_HEAD.match(' '.join(rest))
                if not m:
                    raise Broken('--anchor %s line %d: %r is not "TIME workflow ID EVENTS:HASH"' % (path, n, line))
                wf, count, h = m.group(1), int(m.group(2)), m.group(3)
                if wf not in wf_heads or count >= wf_heads[wf][0]:
                    wf_heads[wf] = (count, h)
                continue
            # A database-wide head: "TIME ENTRIES:EVENTS:HASH" (or the
            # token alone), checked here so a bad line names --anchor.
            if len(parts) > 2 or not HEAD.match(parts[-1]) or (len(parts) == 2 and not TIME.match(parts[0])):
                raise Broken('--anchor %s line %d: %r is not "TIME ENTRIES:EVENTS:HASH" (an RFC 3339 time, '
                             'decimal counts, a 64-digit lower-case hex hash)' % (path, n, line))
            heads.append(parts[-1])
    return heads, wf_heads


def verify(lines, expects, wf_heads=None):
    wf_heads = wf_heads or {}
    hashes = {}   # workflow -> [hash of event 1, ...]
    chains = {}   # workflow -> (count, head hash)
    order = []
    audit = []
    v1 = v2 = 0
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            x = json.loads(raw, object_pairs_hook=no_duplicates)
        except (ValueError, Broken) as err:
            raise Broken('line %d: not a JSON object: %s' % (n, err))
        if not isinstance(x, dict):
            raise Broken('line %d: not a JSON object' % n)
        if x.get('chain') == 'audit':
            audit.append((n, x))
            continue
        wf = x.get('workflow_id')
        where = 'line %d: workflow %s event %s' % (n, wf, x.get('seq'))
        count, prev = chains.get(wf, (0, ''))
        if wf not in chains:
            order.append(wf)
        if x.get('seq') != count + 1:
            raise Broken('%s: sequence %s found where %d was expected (an event is missing or was inserted)' % (where, x.get('seq'), count + 1))
        if x.get('prev_hash') != prev:
            raise Broken('%s: prev_hash does not match the hash of event %d' % (where, count))
        try:
            h = event_hash(x)
        except (KeyError, TypeError) as err:
            raise Broken('%s: missing or malformed field %s' % (where, err))
        if h != x.get('hash'):
            raise Broken('%s: content does not match its hash (the event was edited)' % where)
        if x['v'] == 1:
            v1 += 1
        else:
            v2 += 1
        chains[wf] = (count + 1, h)
        hashes.setdefault(wf, []).append(h)
    live = {}
    prev = ''
    pruned_after = {}
    prunes = {}   # workflow -> [(event_count, head_hash)] of its prunes
    for i, (n, a) in enumerate(audit, 1):
        where = 'line %d: audit entry %s' % (n, a.get('seq'))
        if a.get('seq') != i:
            raise Broken('%s: audit sequence %s found where %d was expected' % (where, a.get('seq'), i))
        if a.get('prev_hash') != prev:
            raise Broken('%s: prev_hash does not match the hash of audit entry %d' % (where, i - 1))
        if audit_hash(a) != a.get('hash'):
            raise Broken('%s: content does not match its hash (the audit entry was edited)' % where)
        prev = a['hash']
        kind, wf = a.get('kind'), a.get('workflow_id')
        if (i == 1) != (kind == 'hash_v2'):
            raise Broken('%s: the audit chain must start with exactly one hash_v2 entry' % where)
        if kind in ('adopt', 'create'):
            if wf in live:
                raise Broken('%s: workflow %s recorded again' % (where, wf))
            live[wf] = i
        elif kind == 'prune':
            if wf not in live:
                raise Broken('%s: prune of workflow %s, which is not live' % (where, wf))
            del live[wf]
            pruned_after[i] = a.get('detail', {}).get('event_count', 0)
            prunes.setdefault(wf, []).append((pruned_after[i], a.get('detail', {}).get('head_hash')))
        elif kind in ('pause', 'resume'):
            if wf and wf not in live:
                raise Broken('%s: %s of workflow %s, which is not live' % (where, kind, wf))
        elif kind == 'limit':
            if wf:
                raise Broken('%s: limit entry names workflow %s; limits are database-wide' % (where, wf))
        elif kind != 'hash_v2':
            raise Broken('%s: unknown kind %r' % (where, kind))
    if audit:
        for wf in order:
            if wf not in live:
                raise Broken('workflow %s has events but the audit chain records no creation of it' % wf)
        missing = sorted((s, wf) for wf, s in live.items() if wf not in chains)
        if missing:
            s, wf = missing[0]
            raise Broken('workflow %s, recorded live by audit entry %d, is missing (deleted whole); %d workflows are missing' % (wf, s, len(missing)))
    elif chains:
        raise Broken('the export has events but no audit chain')
    # Workflow heads first: they name the workflow that lost events.
    for wf, (count, h) in sorted(wf_heads.items()):
        have = hashes.get(wf, [])
        if count <= len(have):
            if have[count - 1] != h:
                raise Broken('anchor: event %d of workflow %s has hash %s, the anchor %s (the chain was rewritten)' % (count, wf, have[count - 1], h))
            continue
        if any(c > count or c == count and ph == h for c, ph in prunes.get(wf, [])):
            continue
        if not have:
            raise Broken('anchor: workflow %s is gone (no events, no prune), the anchor recorded %d events' % (wf, count))
        raise Broken('anchor: workflow %s holds %d events, the anchor recorded %d: events %d to %d of workflow %s are gone' % (wf, len(have), count, len(have) + 1, count, wf))
    events = v1 + v2
    for tok in expects:
        m = HEAD.match(tok)
        if not m:
            raise Broken('--expect %r is not ENTRIES:EVENTS:HASH' % tok)
        entries, count, h = int(m.group(1)), int(m.group(2)), m.group(3)
        if entries > 0:
            if entries > len(audit):
                raise Broken('anchor %s: the audit chain has %d entries, the anchor names entry %d' % (tok, len(audit), entries))
            if audit[entries - 1][1]['hash'] != h:
                raise Broken('anchor %s: audit entry %d has another hash' % (tok, entries))
        pruned = sum(c for s, c in pruned_after.items() if s > entries)
        if events + pruned < count:
            raise Broken('anchor %s: %d events (%d pruned since), the anchor counted %d' % (tok, events, pruned, count))
    return len(chains), events, v1, v2, len(audit)


def main(argv):
    expects, anchors, path = [], [], None
    args = argv[1:]
    while args:
        a = args.pop(0)
        if a == '--expect' and args:
            expects.append(args.pop(0))
        elif a == '--anchor' and args:
            anchors.append(args.pop(0))
        elif a in ('-h', '--help'):
            print(__doc__.strip())
            return 0
        elif a.startswith('-') and a != '-':
            print('audit-verify: unknown option %s (see --help)' % a, file=sys.stderr)
            return 2
        elif path is None:
            path = a
        else:
            print('audit-verify: more than one file', file=sys.stderr)
            return 2
    try:
        data = sys.stdin.buffer.read() if path in (None, '-') else open(path, 'rb').read()
    except OSError as err:
        print('audit-verify: %s' % err, file=sys.stderr)
        return 2
    if data.startswith(b'SQLite format 3\0'):
        print('audit-verify: %s is an SQLite database, not an export: run `graph-engineering-mcp audit export` on it '
              'and verify what that writes (or run `audit verify`, which reads the database)' % (path or 'the input'),
              file=sys.stderr)
        return 2
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as err:
        print('audit-verify: the input is not UTF-8 text, so not an audit export (JSON Lines): %s' % err, file=sys.stderr)
        return 2
    wf_heads = {}
    try:
        for a in anchors:
            heads, wh = read_anchor(a)
            expects.extend(heads)
            for wf, (count, h) in wh.items():
                if wf not in wf_heads or count >= wf_heads[wf][0]:
                    wf_heads[wf] = (count, h)
    except OSError as err:
        print('audit-verify: %s' % err, file=sys.stderr)
        return 2
    except (Broken, UnicodeDecodeError) as err:
        print('audit-verify: %s' % err, file=sys.stderr)
        return 2
    try:
        wfs, events, v1, v2, entries = verify(text.split('\n'), expects, wf_heads)
    except Broken as err:
        print('audit-verify: broken: %s' % err, file=sys.stderr)
        return 1
    print('verified: %d workflow(s), %d event(s) (%d v1, %d v2), %d audit entries' % (wfs, events, v1, v2, entries))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
