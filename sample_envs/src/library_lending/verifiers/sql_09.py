def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    events = _rows(initial_db_path, "SELECT e.id, e.title, b.name AS branch, e.start_time, e.capacity FROM events e "
                                    "JOIN branches b ON b.id = e.branch_id WHERE e.title LIKE '%Walking Tour%' ORDER BY e.id")
    reg_sql = "SELECT r.id, r.event_id, e.title, e.start_time, r.member_id, r.num_attendees, r.status FROM event_registrations r JOIN events e ON e.id = r.event_id ORDER BY r.id"
    before = _rows(initial_db_path, reg_sql)
    after = _rows(final_db_path, reg_sql)
    before_ids = {r["id"] for r in before}
    return {
        "task": "register user 1 with 3 attendees for the Downtown Central Library walking tour on 2026-04-25",
        "walking_tour_events": events,
        "user1_registrations_initial": [r for r in before if r["member_id"] == 1],
        "user1_registrations_final": [r for r in after if r["member_id"] == 1],
        "new_registrations": [r for r in after if r["id"] not in before_ids],
        "changed_registrations": [r for r in after if r["id"] in before_ids and r not in before],
    }
