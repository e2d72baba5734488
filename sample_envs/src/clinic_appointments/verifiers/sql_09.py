def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT m.id, m.user_id, p.first_name || ' ' || p.last_name AS provider_name, m.direction, m.subject, m.is_read "
           "FROM messages m JOIN providers p ON p.id = m.provider_id ORDER BY m.id")
    initial = _fetch(initial_db_path, sql)
    final = _fetch(final_db_path, sql)
    before = {r["id"]: r["is_read"] for r in initial}
    return {
        "expected": "every unread message of user 1 from Priya Natarajan becomes is_read=1; unread messages from other providers (Helen Vasquez, Priya Nair) and other users stay unread",
        "messages_initial": initial,
        "messages_final": final,
        "read_flag_changes": [{"id": r["id"], "provider_name": r["provider_name"], "from": before.get(r["id"]), "to": r["is_read"]} for r in final if before.get(r["id"]) != r["is_read"]],
    }
