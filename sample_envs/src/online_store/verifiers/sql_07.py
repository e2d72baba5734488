def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT id, user_id, label, recipient_name, street, city, state, postal_code, country, is_default "
           "FROM addresses ORDER BY id")
    before = fetch(initial_db_path, sql)
    after = fetch(final_db_path, sql)
    initial_ids = {r["id"] for r in before}
    return {
        "task": "add a default 'Cabin' address (Maya Thompson, 88 Pine Ridge Road, Bend, OR 97701, United States) for user 1",
        "user1_addresses_initial": [r for r in before if r["user_id"] == 1],
        "user1_addresses_final": [r for r in after if r["user_id"] == 1],
        "new_addresses": [r for r in after if r["id"] not in initial_ids],
        "user1_default_ids_final": [r["id"] for r in after if r["user_id"] == 1 and r["is_default"] == 1],
        "other_users_addresses_unchanged": [r for r in before if r["user_id"] != 1] == [r for r in after if r["user_id"] != 1],
    }
