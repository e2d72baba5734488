def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    sql = ("SELECT h.id, h.member_id, h.title_id, t.title, t.format, b.name AS pickup_branch, h.status, h.queue_position, h.notes "
           "FROM holds h JOIN titles t ON t.id = h.title_id JOIN branches b ON b.id = h.pickup_branch_id ORDER BY h.id")
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    initial_ids = {r["id"] for r in before}
    return {
        "task": "place a hold for user 1 on the audiobook 'The Lantern Keeper', pickup at Riverside Branch",
        "lantern_keeper_editions": _rows(initial_db_path, "SELECT id, title, format FROM titles WHERE title = 'The Lantern Keeper'"),
        "lantern_keeper_holds_initial": [r for r in before if r["title"] == "The Lantern Keeper"],
        "new_holds": [r for r in after if r["id"] not in initial_ids],
        "hold_count_initial": len(before),
        "hold_count_final": len(after),
    }
