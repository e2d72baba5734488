def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    sql = ("SELECT h.id, h.member_id, t.title, t.format, h.pickup_branch_id, h.status, h.queue_position "
           "FROM holds h JOIN titles t ON t.id = h.title_id ORDER BY h.id")
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    after_by_id = {r["id"]: r for r in after}
    return {
        "task": "cancel user 1's active hold on the print edition of 'Winter at Greystone'",
        "greystone_holds_initial": [r for r in before if r["title"] == "Winter at Greystone"],
        "greystone_holds_final": [r for r in after if r["title"] == "Winter at Greystone"],
        "changed_holds": [{"before": r, "after": after_by_id.get(r["id"])} for r in before if after_by_id.get(r["id"]) != r],
        "new_holds": [r for r in after if r["id"] not in {b["id"] for b in before}],
    }
