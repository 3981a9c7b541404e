import Foundation

extension Schema {
    /// A stable fingerprint of the schema's shape: entities, attributes (name, type, optionality,
    /// default, preservation), relationships, indexes, constraints and renames. It ignores
    /// ``version``, each entity's ``EntityDescription/duplicateKeyRule`` and the order of keys, so the same schema gives the same hash on every machine
    /// and in every process; any change to the shape changes it.
    public var schemaHash: String {
        var object = fileValue
        if case .object(var root) = object {
            root["version"] = nil
            // What sync does with a duplicate key is not the store's shape: changing it needs no migration.
            if case .array(let entities)? = root["entities"] {
                root["entities"] = .array(
                    entities.map { entity in
                        guard case .object(var members) = entity else { return entity }
                        members["duplicateKeyRule"] = nil
                        return .object(members)
                    })
            }
            object = .object(root)
        }
        let text = object.compactText
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
