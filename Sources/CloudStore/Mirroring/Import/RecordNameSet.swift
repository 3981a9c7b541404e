import Foundation

/// Record names, held compactly: an object's record name (its id's canonical text, upper-case) as
/// the id's 16 bytes, any other name as text.
///
/// A fetch of a zone from scratch keeps the name of every record it brings until it ends, to
/// remove the local objects the server no longer has (``CloudMirror``): as strings, about 170
/// bytes each, the bulk of a 100,000-record bootstrap's growth in memory.
struct RecordNameSet: Sendable, Equatable {
    private var ids: Set<UUID> = []
    private var others: Set<String> = []

    init() {}

    var count: Int { ids.count + others.count }

    mutating func insert(_ name: String) {
        if let id = Self.objectID(name) { ids.insert(id) } else { others.insert(name) }
    }

    func contains(_ name: String) -> Bool {
        if let id = Self.objectID(name) { return ids.contains(id) }
        return others.contains(name)
    }

    /// The id whose record name `name` is: a UUID's text with upper-case hex digits, as
    /// `UUID.uuidString` writes it. Names are case-sensitive, so a lower-case spelling of an id
    /// is another name, kept as text.
    private static func objectID(_ name: String) -> UUID? {
        guard name.utf8.count == 36, !name.utf8.contains(where: { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f") })
        else { return nil }
        return UUID(text: name)
    }
}
