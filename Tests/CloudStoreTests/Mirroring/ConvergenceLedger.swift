@testable import CloudStore
import CloudStoreTesting
import Foundation
import Logging
import Synchronization

/// What was written to one property of one object.
struct PropertyKey: Hashable, CustomStringConvertible {
    var object: UUID
    var property: String
    var description: String { "\(object).\(property)" }
}

/// What every device of a convergence run wrote and what each write replaced, and the checks a
/// converged state must pass against it: nothing duplicated, nothing that nobody deleted missing,
/// every written value final, replaced by a writer who saw it, or in a conflict log.
struct ConvergenceLedger {
    /// Object → entity, for every object inserted.
    var inserted: [UUID: String] = [:]
    var deleted: Set<UUID> = []
    var written: [PropertyKey: [String]] = [:]
    var replaced: [PropertyKey: Set<String>] = [:]

    /// A value written by a writer that read `previous` in the same transaction.
    mutating func wrote(_ key: PropertyKey, _ value: String, replacing previous: String?) {
        ConvergenceRun.trace("\(key) = \(value) replacing \(previous ?? "nothing")")
        written[key, default: []].append(value)
        if let previous { replaced[key, default: []].insert(previous) }
    }

    /// Objects a device deleted: it saw their values and replaced them. If another device's
    /// concurrent edit brings one back, the deletion is what lost (the log has it as `*`), not the
    /// values the deleting device had written before deleting.
    mutating func deleted(_ snapshots: [EntitySnapshot]) {
        for snapshot in snapshots {
            deleted.insert(snapshot.id)
            for (property, value) in snapshot.values {
                replaced[PropertyKey(object: snapshot.id, property: property), default: []].insert(Self.text(value))
            }
        }
    }

    /// How many objects carry a title (a tag's name) another object carries too: every title is
    /// written once, so two objects with one title are one object duplicated.
    static func duplicates(in objects: some Sequence<EntitySnapshot>) -> Int {
        let titles = objects.compactMap { snapshot -> String? in
            guard case .string(let title)? = snapshot.values[snapshot.entityName == "Tag" ? "name" : "title"] else { return nil }
            return title
        }
        return titles.count - Set(titles).count
    }

    /// Objects nobody deleted that are not `present`.
    func missing(from present: [UUID: EntitySnapshot]) -> [UUID] {
        inserted.keys.filter { !deleted.contains($0) && present[$0] == nil }
    }

    /// Objects merged into another that had their unique key, with the one each went into.
    static func uniqueKeyMerges(_ conflicts: some Sequence<ConflictRecord>) -> [UUID: UUID] {
        var merged: [UUID: UUID] = [:]
        for entry in conflicts where entry.policy == ConflictResolution.uniqueKeyMergePolicy {
            if case .uuid(let survivor) = entry.winningValue { merged[entry.objectID] = survivor }
        }
        return merged
    }

    /// Every value that lost a conflict, by object and property.
    static func losingValues(_ conflicts: some Sequence<ConflictRecord>) -> [PropertyKey: Set<String>] {
        var logged: [PropertyKey: Set<String>] = [:]
        for entry in conflicts {
            logged[PropertyKey(object: entry.objectID, property: entry.property), default: []].insert(text(entry.losingValue))
        }
        return logged
    }

    /// Values written to objects that are `present` that are not final, were not replaced by a
    /// writer who saw them, and are not in a conflict log: lost.
    func unexplainedValues(in present: [UUID: EntitySnapshot], logged: [PropertyKey: Set<String>]) -> [String] {
        var unexplained: [String] = []
        for (key, values) in written {
            guard let object = present[key.object] else { continue }
            let final = object.values[key.property].map(Self.text) ?? "-"
            for value in values where value != final && !(replaced[key]?.contains(value) ?? false)
                && !(logged[key]?.contains(value) ?? false)
            {
                unexplained.append("\(key) = \(value) (final \(final))")
            }
        }
        return unexplained
    }

    static func text(_ value: AttributeValue) -> String {
        switch value {
        case .null: "-"
        case .string(let text): text
        case .uuid(let id): id.uuidString
        default: "\(value)"
        }
    }
}

/// The steps of a convergence run's schedule that do not change data.
enum ConvergenceSteps {
    /// Each device syncs with a chance of two in three; answers how many synced and how many failed.
    static func syncSome(
        _ devices: [TestDevice], random: inout SeededRandomNumberGenerator
    ) async -> (syncs: Int, failed: Int) {
        var (syncs, failed) = (0, 0)
        for device in devices where random.next(upTo: 3) > 0 {
            syncs += 1
            ConvergenceRun.trace("\(device.name) syncs")
            do { try await device.sync() } catch {
                failed += 1
                ConvergenceRun.trace("\(device.name)'s sync failed: \(error)")
            }
        }
        return (syncs, failed)
    }

    /// Cuts one proxy off, or heals it; answers whether it was cut off now.
    static func togglePartition(of proxies: [FaultProxy], random: inout SeededRandomNumberGenerator) -> Bool {
        let index = random.next(upTo: proxies.count)
        let proxy = proxies[index]
        proxy.isPartitioned.toggle()
        ConvergenceRun.trace("proxy \(index) partitioned: \(proxy.isPartitioned)")
        return proxy.isPartitioned
    }
}

/// A seed's trace and device log lines kept in memory (`CLOUDSTORE_CONVERGENCE_TRACE=memory`):
/// cleared when a seed begins, written to a file when it fails.
final class TraceBuffer: Sendable {
    static let shared = TraceBuffer()
    private let lines = Mutex<[String]>([])

    func append(_ line: String) { lines.withLock { $0.append(line) } }
    func clear() { lines.withLock { $0.removeAll(keepingCapacity: true) } }

    /// Writes the lines kept to `<temporary directory>/cloudstore-trace-<seed>.log`; answers its path.
    @discardableResult
    func write(seed: UInt64) -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cloudstore-trace-\(seed).log").path
        let text = lines.withLock { $0.joined(separator: "\n") }
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return path
    }

    struct Handler: LogHandler {
        let label: String
        var logLevel: Logger.Level = .info
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            let fields = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            TraceBuffer.shared.append("\(label) \(event.level) \(event.message)\(fields)")
        }
    }
}
