import CloudStoreWire
import Foundation
import Hummingbird

/// The console's pages: each reads what it shows (scoped to the one partition or zone its address
/// names) and renders its template.
extension ConsoleController {
    static let defaultPageSize = 50
    static let maxPageSize = 200

    @Sendable func overview(_ query: ConsoleQuery) async throws -> Response {
        let activity = services.metrics.activity
        let now = Date()
        let replicas = services.storage.replicaStatuses.map { status in
            OverviewView.Replica(
                name: status.replica, state: status.available ? "takes reads" : "resting after a failed read",
                served: ConsoleFormat.count(status.served), behind: ConsoleFormat.count(status.behind),
                failed: ConsoleFormat.count(status.failed))
        }
        let view = OverviewView(
            activity: ConsoleFormat.activity(activity.totals, started: activity.started, now: now),
            uptime: ConsoleFormat.span(seconds: now.timeIntervalSince(activity.started)),
            started: ConsoleFormat.time(activity.started),
            requestCount: ConsoleFormat.count(Self.apiRequests(activity.recentRequests).count),
            failureCount: ConsoleFormat.count(activity.recentFailures.count),
            containers: services.containers.sorted().map { name in
                OverviewView.Container(
                    name: name, href: ConsoleFormat.link("/console/container", ["container": name]),
                    developmentSchema: Self.schemaLink(name, .development),
                    productionSchema: Self.schemaLink(name, .production))
            },
            replicas: replicas,
            hasReplicas: !replicas.isEmpty)
        return ConsoleView.render("overview", title: "Overview", signedIn: true, page: view)
    }

    @Sendable func container(_ query: ConsoleQuery) async throws -> Response {
        let container = try servedContainer(query)
        var environments: [ContainerView.Environment] = []
        for environment in CloudEnvironment.allCases {
            let databases = try await services.storage.partitions(container: container, environment: environment).map {
                summary in
                let partition = DatabasePartition(
                    container: container, environment: environment, scope: summary.scope, owner: summary.owner)
                return ContainerView.Database(
                    scope: summary.scope.rawValue, owner: summary.owner, zones: ConsoleFormat.count(summary.zoneCount),
                    href: Self.databaseLink(partition))
            }
            environments.append(
                ContainerView.Environment(
                    name: environment.rawValue, schemaHref: Self.schemaLink(container, environment),
                    databases: databases, hasDatabases: !databases.isEmpty))
        }
        return ConsoleView.render(
            "container", title: container, crumbs: [Self.overviewCrumb], signedIn: true,
            page: ContainerView(environments: environments))
    }

    @Sendable func database(_ query: ConsoleQuery) async throws -> Response {
        let partition = try self.partition(query)
        let summary = try await services.storage.databaseSummary(of: partition)
        let zones = summary.zones.map { item in
            DatabaseView.Zone(
                name: item.zone.name, records: ConsoleFormat.count(item.recordCount), seq: String(item.zone.seq),
                token: SyncToken.zone(partition.zone(item.zone.name), item.zone, seq: item.zone.seq).encoded,
                href: Self.zoneLink(partition.zone(item.zone.name)))
        }
        return ConsoleView.render(
            "database", title: Self.name(of: partition), crumbs: Self.crumbs(to: partition.container), signedIn: true,
            page: DatabaseView(databaseToken: SyncToken.database(partition, seq: summary.dbSeq).encoded, zones: zones))
    }

    @Sendable func zone(_ query: ConsoleQuery) async throws -> Response {
        let zone = try zoneAddress(query)
        let limit = try Self.pageSize(query)
        let pageNumber = query["page"].flatMap(Int.init).map { max(1, $0) } ?? 1
        let after = query["after"]
        guard let rows = try await services.storage.records(in: zone, after: after, limit: limit) else {
            throw Self.zoneNotFound(zone)
        }
        let shown = Array(rows.prefix(limit))
        let records = try shown.map { row in
            let content = try row.content?.decoded()
            return ZoneView.Record(
                name: row.name, type: row.type, changeTag: row.changeTag,
                modified: content.map { ConsoleFormat.stamp($0.modified) } ?? "",
                fields: (content?.fields ?? [:]).sorted { $0.key < $1.key }.map {
                    ZoneView.Field(name: $0.key, value: ConsoleFormat.value($0.value, limit: 200))
                },
                href: Self.recordLink(zone, row.name))
        }
        let first = (pageNumber - 1) * limit + 1
        let range =
            shown.isEmpty
            ? (after == nil ? "No records in this zone" : "No more records")
            : "Page \(pageNumber): records \(ConsoleFormat.count(first)) to \(ConsoleFormat.count(first + shown.count - 1))"
        let moreComing = rows.count > limit
        let view = ZoneView(
            range: range, records: records, hasRecords: !records.isEmpty, hasFirst: after != nil,
            firstHref: Self.zoneLink(zone, limit: query["limit"]),
            hasNext: moreComing,
            nextHref: Self.zoneLink(
                zone, limit: query["limit"], after: shown.last?.name, page: String(pageNumber + 1)))
        return ConsoleView.render(
            "zone", title: "Zone \(zone.zoneName)", crumbs: Self.crumbs(to: zone.partition), signedIn: true, page: view)
    }

    @Sendable func record(_ query: ConsoleQuery) async throws -> Response {
        let zone = try zoneAddress(query)
        let name = try query.required("record")
        guard let rows = try await services.storage.records(named: [name], in: zone) else { throw Self.zoneNotFound(zone) }
        guard let row = rows[name], let content = try row.content?.decoded() else {
            throw ConsoleFailure(
                .notFound, "Record \(name) does not exist in zone \(zone.zoneName) of the \(Self.name(of: zone.partition)).")
        }
        let fields = content.fields.sorted { $0.key < $1.key }.map {
            RecordView.Field(name: $0.key, type: ConsoleFormat.type(of: $0.value), value: ConsoleFormat.value($0.value))
        }
        let view = RecordView(
            type: row.type, changeTag: row.changeTag, created: ConsoleFormat.stamp(content.created),
            modified: ConsoleFormat.stamp(content.modified), fields: fields, hasFields: !fields.isEmpty)
        return ConsoleView.render(
            "record", title: "Record \(name)",
            crumbs: Self.crumbs(to: zone.partition) + [ConsoleCrumb(text: zone.zoneName, href: Self.zoneLink(zone))],
            signedIn: true, page: view)
    }

    @Sendable func schema(_ query: ConsoleQuery) async throws -> Response {
        let container = try servedContainer(query)
        let environment = try Self.environment(query)
        let schema = try await services.storage.schema(container: container, environment: environment)
        let other: CloudEnvironment = environment == .development ? .production : .development
        let recordTypes = schema.recordTypes.map { type in
            SchemaView.RecordType(
                name: type.name,
                fields: type.fields.map {
                    SchemaView.Field(name: $0.name, type: $0.type.rawValue, queryable: $0.queryable == true ? "yes" : "no")
                })
        }
        let view = SchemaView(
            version: String(schema.version ?? 0), otherEnvironment: other.rawValue,
            otherHref: Self.schemaLink(container, other), recordTypes: recordTypes, hasRecordTypes: !recordTypes.isEmpty)
        return ConsoleView.render(
            "schema", title: "Schema of \(environment.rawValue)", crumbs: Self.crumbs(to: container), signedIn: true,
            page: view)
    }

    @Sendable func operations(_ query: ConsoleQuery) async throws -> Response {
        let requests = Self.apiRequests(services.metrics.activity.recentRequests)
        return ConsoleView.render(
            "requests", title: "Recent operations", crumbs: [Self.overviewCrumb], signedIn: true,
            page: RequestsView(
                note: "The last \(services.metrics.activity.capacity) requests the server answered, newest first; the console's own pages are left out.",
                empty: "No requests yet.", showsErrors: false, requests: requests.map(RequestsView.Request.init),
                hasRequests: !requests.isEmpty))
    }

    @Sendable func errors(_ query: ConsoleQuery) async throws -> Response {
        let failures = services.metrics.activity.recentFailures
        return ConsoleView.render(
            "requests", title: "Recent errors", crumbs: [Self.overviewCrumb], signedIn: true,
            page: RequestsView(
                note: "The last \(services.metrics.activity.capacity) answers of 400 and above, newest first.",
                empty: "No errors yet.", showsErrors: true, requests: failures.map(RequestsView.Request.init),
                hasRequests: !failures.isEmpty))
    }

    // MARK: - Addresses

    private func servedContainer(_ query: ConsoleQuery) throws(ConsoleFailure) -> String {
        let container = try query.required("container")
        guard services.containers.contains(container) else {
            throw ConsoleFailure(.notFound, "Container \(container) is not served here.")
        }
        return container
    }

    private static func environment(_ query: ConsoleQuery) throws(ConsoleFailure) -> CloudEnvironment {
        let name = try query.required("environment")
        guard let environment = CloudEnvironment(rawValue: name) else {
            throw ConsoleFailure(.badRequest, "Environment \(name) is unknown: it is development or production.")
        }
        return environment
    }

    private func partition(_ query: ConsoleQuery) throws(ConsoleFailure) -> DatabasePartition {
        let container = try servedContainer(query)
        let environment = try Self.environment(query)
        let scopeName = try query.required("scope")
        guard let scope = DatabaseScope(rawValue: scopeName) else {
            throw ConsoleFailure(.badRequest, "Database \(scopeName) is unknown: it is public, private or shared.")
        }
        return DatabasePartition(container: container, environment: environment, scope: scope, owner: try query.required("owner"))
    }

    private func zoneAddress(_ query: ConsoleQuery) throws(ConsoleFailure) -> ZoneAddress {
        try partition(query).zone(try query.required("zone"))
    }

    private static func pageSize(_ query: ConsoleQuery) throws(ConsoleFailure) -> Int {
        guard let text = query["limit"] else { return defaultPageSize }
        guard let size = Int(text), (1...maxPageSize).contains(size) else {
            throw ConsoleFailure(.badRequest, "A page holds 1 to \(maxPageSize) records; limit=\(text) is not that.")
        }
        return size
    }

    private static func zoneNotFound(_ zone: ZoneAddress) -> ConsoleFailure {
        ConsoleFailure(.notFound, "Zone \(zone.zoneName) does not exist in the \(name(of: zone.partition)).")
    }

    /// `private database of _alice`, `public database`.
    static func name(of partition: DatabasePartition) -> String {
        partition.scope == .public
            ? "\(partition.environment.rawValue) public database"
            : "\(partition.environment.rawValue) \(partition.scope.rawValue) database of \(partition.owner)"
    }

    /// The requests of the database API, without the console's own pages.
    static func apiRequests(_ requests: [ServerActivity.Request]) -> [ServerActivity.Request] {
        requests.filter { !$0.route.hasPrefix("/console") && !$0.route.hasPrefix("console") }
    }

    // MARK: - Links

    static let overviewCrumb = ConsoleCrumb(text: "Overview", href: "/console")

    static func crumbs(to container: String) -> [ConsoleCrumb] {
        [overviewCrumb, ConsoleCrumb(text: container, href: ConsoleFormat.link("/console/container", ["container": container]))]
    }

    static func crumbs(to partition: DatabasePartition) -> [ConsoleCrumb] {
        crumbs(to: partition.container) + [ConsoleCrumb(text: name(of: partition), href: databaseLink(partition))]
    }

    static func schemaLink(_ container: String, _ environment: CloudEnvironment) -> String {
        ConsoleFormat.link("/console/schema", ["container": container, "environment": environment.rawValue])
    }

    static func databaseLink(_ partition: DatabasePartition) -> String {
        ConsoleFormat.link(
            "/console/database",
            [
                "container": partition.container, "environment": partition.environment.rawValue,
                "scope": partition.scope.rawValue, "owner": partition.owner,
            ])
    }

    static func zoneLink(_ zone: ZoneAddress, limit: String? = nil, after: String? = nil, page: String? = nil) -> String {
        let partition = zone.partition
        return ConsoleFormat.link(
            "/console/zone",
            [
                "container": partition.container, "environment": partition.environment.rawValue,
                "scope": partition.scope.rawValue, "owner": partition.owner, "zone": zone.zoneName, "limit": limit,
                "after": after, "page": page,
            ])
    }

    static func recordLink(_ zone: ZoneAddress, _ name: String) -> String {
        let partition = zone.partition
        return ConsoleFormat.link(
            "/console/record",
            [
                "container": partition.container, "environment": partition.environment.rawValue,
                "scope": partition.scope.rawValue, "owner": partition.owner, "zone": zone.zoneName, "record": name,
            ])
    }
}

// MARK: - Views

struct OverviewView: Sendable {
    struct Container: Sendable {
        var name: String
        var href: String
        var developmentSchema: String
        var productionSchema: String
    }

    var activity: String
    var uptime: String
    var started: String
    var requestCount: String
    var failureCount: String
    var containers: [Container]
    /// The PostgreSQL read replicas (`--postgres-replica`) and their reads since the server started,
    /// as `GET /readyz` lists them.
    var replicas: [Replica]
    /// Stored, not computed: the templates read a view's stored properties.
    var hasReplicas: Bool

    struct Replica: Sendable {
        var name: String
        /// Whether it takes reads now, or rests after a failed one.
        var state: String
        var served: String
        var behind: String
        var failed: String
    }
}

struct ContainerView: Sendable {
    struct Database: Sendable {
        var scope: String
        var owner: String
        var zones: String
        var href: String
    }

    struct Environment: Sendable {
        var name: String
        var schemaHref: String
        var databases: [Database]
        var hasDatabases: Bool
    }

    var environments: [Environment]
}

struct DatabaseView: Sendable {
    struct Zone: Sendable {
        var name: String
        var records: String
        var seq: String
        var token: String
        var href: String
    }

    var databaseToken: String
    var zones: [Zone]
}

struct ZoneView: Sendable {
    struct Field: Sendable {
        var name: String
        var value: String
    }

    struct Record: Sendable {
        var name: String
        var type: String
        var changeTag: String
        var modified: String
        var fields: [Field]
        var href: String
    }

    var range: String
    var records: [Record]
    var hasRecords: Bool
    var hasFirst: Bool
    var firstHref: String
    var hasNext: Bool
    var nextHref: String
}

struct RecordView: Sendable {
    struct Field: Sendable {
        var name: String
        var type: String
        var value: String
    }

    var type: String
    var changeTag: String
    var created: String
    var modified: String
    var fields: [Field]
    var hasFields: Bool
}

struct SchemaView: Sendable {
    struct Field: Sendable {
        var name: String
        var type: String
        var queryable: String
    }

    struct RecordType: Sendable {
        var name: String
        var fields: [Field]
    }

    var version: String
    var otherEnvironment: String
    var otherHref: String
    var recordTypes: [RecordType]
    var hasRecordTypes: Bool
}

struct RequestsView: Sendable {
    struct Request: Sendable {
        var time: String
        var request: String
        var container: String
        var caller: String
        var status: String
        var duration: String
        var error: String

        init(_ request: ServerActivity.Request) {
            time = ConsoleFormat.time(request.time)
            self.request = "\(request.method) \(Self.operation(of: request.route))"
            container = request.container ?? "–"
            caller = request.caller ?? "not signed in"
            status = String(request.status)
            duration = ConsoleFormat.duration(request.duration)
            let error = [request.errorCode, request.reason].compactMap { $0 }.joined(separator: ": ")
            self.error = error.isEmpty ? "–" : error
        }

        /// The operation of a route pattern: `records/modify` for
        /// `database/1/{container}/{environment}/{database}/records/modify`.
        static func operation(of route: String) -> String {
            var segments = route.split(separator: "/").filter { !$0.hasPrefix("{") && !$0.hasPrefix(":") }
            if segments.starts(with: ["database", "1"]) { segments.removeFirst(2) }
            return segments.joined(separator: "/")
        }
    }

    var note: String
    var empty: String
    var showsErrors: Bool
    var requests: [Request]
    var hasRequests: Bool
}
