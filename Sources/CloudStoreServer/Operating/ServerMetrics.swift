import CoreMetrics
import Foundation
import Prometheus

/// The server's measurements, through swift-metrics into a Prometheus registry of this server's
/// own (several servers in one process keep separate counts), and into ``ServerActivity`` for the
/// console. `GET /metrics` answers the registry in Prometheus's text format.
///
/// | metric | kind | labels |
/// |---|---|---|
/// | `cloudstore_requests_total` | counter | `route`, `status` |
/// | `cloudstore_request_duration_seconds` | histogram | `route` |
/// | `cloudstore_records_written_total`, `cloudstore_records_served_total` | counter | |
/// | `cloudstore_long_polls_waiting` | gauge | |
/// | `cloudstore_storage_errors_total` | counter | |
/// | `cloudstore_rate_limited_total` | counter | |
/// | `cloudstore_asset_bytes_uploaded_total`, `cloudstore_asset_bytes_downloaded_total` | counter | |
/// | `cloudstore_assets_removed_total`, `cloudstore_asset_bytes_removed_total` | counter | |
/// | `cloudstore_replica_reads_total` (PostgreSQL read replicas) | counter | `replica`, `outcome`: `served`, `behind`, `failed` |
final class ServerMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    let activity: ServerActivity
    private let factory: PrometheusMetricsFactory
    private let recordsWritten: CoreMetrics.Counter
    private let recordsServed: CoreMetrics.Counter
    private let longPollsWaiting: CoreMetrics.Meter
    private let storageErrors: CoreMetrics.Counter
    private let rateLimited: CoreMetrics.Counter
    private let assetBytesUploaded: CoreMetrics.Counter
    private let assetBytesDownloaded: CoreMetrics.Counter
    private let assetsRemoved: CoreMetrics.Counter
    private let assetBytesRemoved: CoreMetrics.Counter

    init(activity: ServerActivity = ServerActivity()) {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(5), .milliseconds(25), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(5), .seconds(30), .seconds(60),
        ]
        self.factory = factory
        self.activity = activity
        recordsWritten = CoreMetrics.Counter(label: "cloudstore_records_written_total", factory: factory)
        recordsServed = CoreMetrics.Counter(label: "cloudstore_records_served_total", factory: factory)
        longPollsWaiting = CoreMetrics.Meter(label: "cloudstore_long_polls_waiting", factory: factory)
        storageErrors = CoreMetrics.Counter(label: "cloudstore_storage_errors_total", factory: factory)
        rateLimited = CoreMetrics.Counter(label: "cloudstore_rate_limited_total", factory: factory)
        assetBytesUploaded = CoreMetrics.Counter(label: "cloudstore_asset_bytes_uploaded_total", factory: factory)
        assetBytesDownloaded = CoreMetrics.Counter(label: "cloudstore_asset_bytes_downloaded_total", factory: factory)
        assetsRemoved = CoreMetrics.Counter(label: "cloudstore_assets_removed_total", factory: factory)
        assetBytesRemoved = CoreMetrics.Counter(label: "cloudstore_asset_bytes_removed_total", factory: factory)
    }

    /// Counts an answered request by its route and status, and its latency.
    func answered(_ request: ServerActivity.Request) {
        CoreMetrics.Counter(
            label: "cloudstore_requests_total", dimensions: [("route", request.route), ("status", String(request.status))],
            factory: factory
        ).increment()
        CoreMetrics.Timer(
            label: "cloudstore_request_duration_seconds", dimensions: [("route", request.route)], factory: factory
        ).recordNanoseconds(Int64(request.duration.components.seconds) * 1_000_000_000 + request.duration.components.attoseconds / 1_000_000_000)
        if request.status == 429 { rateLimited.increment() }
        activity.record(request)
    }

    func wrote(_ count: Int) {
        guard count > 0 else { return }
        recordsWritten.increment(by: Int64(count))
        activity.recordsWritten(count)
    }

    func served(_ count: Int) {
        guard count > 0 else { return }
        recordsServed.increment(by: Int64(count))
        activity.recordsServed(count)
    }

    func uploadedAssetBytes(_ count: Int64) {
        guard count > 0 else { return }
        assetBytesUploaded.increment(by: count)
    }

    func downloadedAssetBytes(_ count: Int) {
        guard count > 0 else { return }
        assetBytesDownloaded.increment(by: Int64(count))
    }

    func removedAssets(_ sweep: AssetSweep) {
        guard sweep.assets > 0 else { return }
        assetsRemoved.increment(by: Int64(sweep.assets))
        assetBytesRemoved.increment(by: sweep.bytes)
    }

    /// A read a replica was asked for (``ReplicaRouting/Outcome``): served there, or answered by
    /// the primary because the replica was behind or failed.
    func replicaRead(_ replica: String, _ outcome: ReplicaRouting.Outcome) {
        CoreMetrics.Counter(
            label: "cloudstore_replica_reads_total", dimensions: [("replica", replica), ("outcome", outcome.rawValue)],
            factory: factory
        ).increment()
    }

    func storageFailed() {
        storageErrors.increment()
        activity.storageError()
    }

    /// Counts a long poll as waiting until `body` returns.
    func waitingLongPoll<T>(_ body: () async throws -> T) async rethrows -> T {
        longPollsWaiting.increment()
        activity.longPollStarted()
        defer {
            longPollsWaiting.decrement()
            activity.longPollEnded()
        }
        return try await body()
    }

    /// The registry in Prometheus's text exposition format.
    func exposition() -> [UInt8] { registry.emitToBuffer() }
}
