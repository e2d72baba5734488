def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    sql = ("SELECT e.id, e.title, b.name AS branch, e.start_time, e.end_time FROM events e JOIN branches b ON b.id = e.branch_id "
           "WHERE e.title LIKE '%Watercolor%' ORDER BY e.id")
    events = _rows(initial_db_path, sql)
    target = [e for e in events if e["branch"] == "Riverside Branch"]
    regs_before = _rows(initial_db_path, "SELECT * FROM event_registrations ORDER BY id")
    regs_after = _rows(final_db_path, "SELECT * FROM event_registrations ORDER BY id")
    return {
        "task": "read-only: start of the Riverside Branch 'Intro to Watercolor Painting' workshop",
        "expected_start_time": target[0]["start_time"] if target else None,
        "watercolor_events": events,
        "registrations_unchanged": regs_before == regs_after,
        "new_registrations": [r for r in regs_after if r not in regs_before],
    }
