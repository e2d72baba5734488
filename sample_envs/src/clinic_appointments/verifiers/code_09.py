def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    provider = _rows(final_db_path, "SELECT id FROM providers WHERE first_name = 'Priya' AND last_name = 'Natarajan'")
    if len(provider) != 1:
        return {"result": "others"}
    provider_id = provider[0][0]
    sql = "SELECT id, user_id, provider_id, is_read FROM messages ORDER BY id"
    before = {r[0]: r for r in _rows(initial_db_path, sql)}
    after = {r[0]: r for r in _rows(final_db_path, sql)}
    targets = [i for i, r in before.items() if r[1] == 1 and r[2] == provider_id and r[3] == 0]
    if not targets:
        return {"result": "others"}
    if any(i not in after or after[i][3] != 1 for i in targets):
        return {"result": "others"}
    for i, r in before.items():
        if i not in targets and r[3] == 0 and (i not in after or after[i][3] != 0):
            return {"result": "others"}
    return {"result": "complete"}
