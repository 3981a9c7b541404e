/// When the PostgreSQL backend refreshes the planner's statistics of its record tables (`ANALYZE`)
/// itself, rather than waiting for autovacuum.
///
/// Without statistics PostgreSQL takes `(partition_id, zone)` for a selective prefix, and looks a
/// batch of records up by name (`name = ANY(...)`) by scanning every record of the zone through
/// another index with the names as a filter: each `records/modify` then costs time in proportion to
/// the zone's size (measured: 22 ms per 400-record batch at 50,000 records, against 2 ms through the
/// primary key). Autovacuum analyzes a table once a minute at most, and only after it grew by a
/// tenth, so a fresh server's first bulk upload ran all of it on the bad plan.
///
/// The rule: refresh once as many rows were written (through this server instance) since the last
/// refresh as the statistics counted then, and at least ``firstRefresh``: the table may have
/// doubled. A load of n records refreshes about log₂(n / 1,000) times. A pure value, driven by
/// tests directly; ``PostgresStorage`` keeps one and runs the `ANALYZE`.
struct PlannerStatistics: Sendable, Equatable {
    /// Rows written before the first refresh when the statistics counted none (never analyzed).
    static let firstRefresh = 1_000

    /// The rows the statistics counted at their last refresh (`pg_class.reltuples`, or the rows
    /// written up to a refresh this instance ran); 0 when the table was never analyzed.
    private(set) var rowsAtRefresh: Int
    /// Record rows written (saves and deletes) through this instance since the last refresh.
    private(set) var writtenSinceRefresh = 0

    init(rowsAtRefresh: Int = 0) {
        self.rowsAtRefresh = max(0, rowsAtRefresh)
    }

    /// Notes `count` record rows written; true when the statistics are to be refreshed now (the
    /// counting starts again from here).
    mutating func written(_ count: Int) -> Bool {
        writtenSinceRefresh += count
        guard writtenSinceRefresh >= max(Self.firstRefresh, rowsAtRefresh) else { return false }
        rowsAtRefresh += writtenSinceRefresh
        writtenSinceRefresh = 0
        return true
    }
}
