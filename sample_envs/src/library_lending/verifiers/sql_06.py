def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    sql = ("SELECT h.id, h.member_id, t.title, b.id AS pickup_branch_id, b.name AS pickup_branch, h.status, h.notes "
           "FROM holds h JOIN titles t ON t.id = h.title_id JOIN branches b ON b.id = h.pickup_branch_id ORDER BY h.id")
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    after_by_id = {r["id"]: r for r in after}
    return {
        "task": "move the pickup branch of user 1's 'Paper Moons' hold to Eastside Branch",
        "branches": _rows(initial_db_path, "SELECT id, name FROM branches ORDER BY id"),
        "paper_moons_holds_initial": [r for r in before if r["title"] == "Paper Moons"],
        "paper_moons_holds_final": [r for r in after if r["title"] == "Paper Moons"],
        "changed_holds": [{"before": r, "after": after_by_id.get(r["id"])} for r in before if after_by_id.get(r["id"]) != r],
    }
