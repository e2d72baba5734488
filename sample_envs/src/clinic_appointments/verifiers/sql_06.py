def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT m.id, m.user_id, m.provider_id, p.first_name || ' ' || p.last_name AS provider_name, m.direction, m.subject, m.body, m.is_read "
           "FROM messages m JOIN providers p ON p.id = m.provider_id ORDER BY m.id")
    initial = _fetch(initial_db_path, sql)
    final = _fetch(final_db_path, sql)
    initial_ids = {r["id"] for r in initial}
    return {
        "expected": {"provider": "Priya Nair", "direction": "patient_to_provider", "subject": "Metformin side effects", "body": "I have had mild nausea after my evening Metformin dose this week."},
        "new_messages": [r for r in final if r["id"] not in initial_ids],
        "message_count": {"initial": len(initial), "final": len(final)},
        "providers_named_priya": _fetch(final_db_path, "SELECT id, first_name, last_name FROM providers WHERE first_name = 'Priya'"),
    }
