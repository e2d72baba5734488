def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    event = _query(initial_db_path, "SELECT e.id FROM events e JOIN branches b ON b.id = e.branch_id WHERE e.title = 'Local History Walking Tour' "
                                    "AND b.name = 'Downtown Central Library' AND date(e.start_time) = '2026-04-25'")
    if len(event) != 1:
        return {"result": "others"}
    event_id = event[0][0]
    initial_ids = {r[0] for r in _query(initial_db_path, "SELECT id FROM event_registrations")}
    new_regs = [r for r in _query(final_db_path, "SELECT id, event_id, member_id, num_attendees, status FROM event_registrations ORDER BY id")
                if r[0] not in initial_ids]
    active_new = [r for r in new_regs if r[2] == 1 and r[4] == "registered"]
    if len(active_new) != 1:
        return {"result": "others"}
    _rid, reg_event, _member, attendees, _status = active_new[0]
    if reg_event != event_id or attendees != 3:
        return {"result": "others"}
    return {"result": "complete"}
