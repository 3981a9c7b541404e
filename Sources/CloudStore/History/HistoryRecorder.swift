import Foundation

/// Collects the changes of one unit of work, one per object, merging what happens to the same object:
///
/// | first | then | recorded |
/// |---|---|---|
/// | insert | update | insert |
/// | insert | delete | nothing |
/// | update | update | update (both sets of properties) |
/// | update | delete | delete |
/// | delete | insert (same id) | delete, then insert (two changes, so the re-creation is not lost) |
struct HistoryRecorder {
    struct Key: Hashable {
        var entity: Int
        var id: UUID
    }

    struct Change {
        var entity: Int
        var id: UUID
        var type: HistoryChange.ChangeType
        var updated: Set<String>
        var tombstone: [String: AttributeValue]
        var isCancelled = false
    }

    private var changes: [Change] = []
    private var latest: [Key: Int] = [:]

    var isEmpty: Bool { changes.allSatisfy(\.isCancelled) }

    mutating func inserted(entity: Int, id: UUID) {
        latest[Key(entity: entity, id: id)] = changes.count
        changes.append(Change(entity: entity, id: id, type: .insert, updated: [], tombstone: [:]))
    }

    mutating func updated(entity: Int, id: UUID, properties: some Sequence<String>) {
        let key = Key(entity: entity, id: id)
        if let index = latest[key] {
            switch changes[index].type {
            case .insert: return
            case .update: changes[index].updated.formUnion(properties)
            case .delete: return
            }
            return
        }
        latest[key] = changes.count
        changes.append(Change(entity: entity, id: id, type: .update, updated: Set(properties), tombstone: [:]))
    }

    mutating func deleted(entity: Int, id: UUID, tombstone: [String: AttributeValue]) {
        let key = Key(entity: entity, id: id)
        if let index = latest[key] {
            switch changes[index].type {
            case .insert:
                changes[index].isCancelled = true
                latest[key] = nil
                return
            case .update:
                changes[index].type = .delete
                changes[index].updated = []
                changes[index].tombstone = tombstone
                return
            case .delete:
                return
            }
        }
        latest[key] = changes.count
        changes.append(Change(entity: entity, id: id, type: .delete, updated: [], tombstone: tombstone))
    }

    /// The changes to keep, in order.
    var recordedChanges: [Change] { changes.filter { !$0.isCancelled } }
}
