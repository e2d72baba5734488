def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    audio = _query(initial_db_path, "SELECT id FROM titles WHERE title = 'The Lantern Keeper' AND format = 'audiobook'")
    other_editions = [r[0] for r in _query(initial_db_path, "SELECT id FROM titles WHERE title = 'The Lantern Keeper' AND format != 'audiobook'")]
    branch = _query(initial_db_path, "SELECT id FROM branches WHERE name = 'Riverside Branch'")
    if len(audio) != 1 or len(branch) != 1:
        return {"result": "others"}
    audio_id, branch_id = audio[0][0], branch[0][0]
    initial_ids = {r[0] for r in _query(initial_db_path, "SELECT id FROM holds")}
    new_holds = [r for r in _query(final_db_path, "SELECT id, title_id, member_id, pickup_branch_id, status FROM holds ORDER BY id")
                 if r[0] not in initial_ids]
    matching = [r for r in new_holds if r[1] == audio_id and r[2] == 1 and r[3] == branch_id and r[4] in ("waiting", "ready")]
    if len(matching) != 1:
        return {"result": "others"}
    if any(r[1] in other_editions and r[2] == 1 and r[4] != "cancelled" for r in new_holds):
        return {"result": "others"}
    return {"result": "complete"}
