import Foundation
import Synchronization

/// What a Swift entity type declares, learned by probing its `Decodable` conformance once.
struct EntityLayout: Sendable {
    /// The attributes and relationships the type declares.
    var declaredKeys: Set<String>
    /// False when the probe could not construct a value past some property, so later properties
    /// were not seen (they are still checked whenever a value is encoded or decoded).
    var isComplete: Bool
}

extension Schema {
    /// Checks a Swift entity type against its entity: every attribute is a property of a matching
    /// type and optionality, to-one relationships are `UUID?`, to-many relationships (if declared) are
    /// `[UUID]`, and nothing else is declared. Throws a ``SchemaError`` listing every mismatch.
    ///
    /// ```swift
    /// try schema.check(Note.self)
    /// // schema "Notes" has 1 problem:
    /// //   - Note.priority: the Swift property is a String but the attribute is an int64; declare it as Int64 (or Int)
    /// ```
    public func check<E: Entity>(_ type: E.Type) throws {
        let (_, problems) = layout(of: type)
        if !problems.isEmpty { throw SchemaError(schema: name, problems: problems) }
    }

    /// The layout of a Swift entity type, probed once per type and entity description. (The key
    /// is the entity's description, not the schema hash: hashing the description costs about a
    /// microsecond, computing the schema hash serialises the whole schema, on every save.)
    func layout<E: Entity>(of type: E.Type) -> (EntityLayout, [SchemaProblem]) {
        let key = LayoutCacheKey(type: ObjectIdentifier(type), entity: entity(named: E.entityName))
        if let cached = layoutCache.withLock({ $0[key] }) { return cached }
        let result = probe(type)
        layoutCache.withLock { $0[key] = result }
        return result
    }

    private func probe<E: Entity>(_ type: E.Type) -> (EntityLayout, [SchemaProblem]) {
        guard let entity = entity(named: E.entityName) else {
            return (
                EntityLayout(declaredKeys: [], isComplete: false),
                [SchemaProblem(
                    entity: E.entityName,
                    "the Swift type \(E.self) names entity \"\(E.entityName)\", which is not in the schema; set entityName or add the entity")]
            )
        }
        let recorder = ProbeRecorder()
        let isComplete = (try? E(from: ProbeDecoder(recorder: recorder, entity: entity))) != nil
        var problems: [SchemaProblem] = []
        func problem(_ property: String, _ message: String) {
            problems.append(SchemaProblem(entity: entity.name, property: property, message))
        }
        var declared: Set<String> = []
        for request in recorder.requests {
            if request.key == "id" {
                if request.type != UUID.self || request.isOptional {
                    problem("id", "the id must be a non-optional UUID, the object's record name")
                }
                continue
            }
            declared.insert(request.key)
            let swiftName = AttributeConversion.name(request.type)
            if let attribute = entity.attribute(named: request.key) {
                if !Self.fits(request.type, attribute.type) {
                    problem(
                        request.key,
                        "the Swift property is a \(swiftName) but the attribute is \(article(attribute.type.rawValue)) \(attribute.type.rawValue); declare it as \(AttributeConversion.suggestedSwiftType(for: attribute.type))")
                } else if request.isOptional && !attribute.isOptional {
                    problem(request.key, "the Swift property is optional but the attribute is not; declare it as \(swiftName)")
                } else if !request.isOptional && attribute.isOptional {
                    problem(
                        request.key,
                        "the attribute is optional but the Swift property is not, so a missing value could not be read; declare it as \(swiftName)?")
                }
            } else if let relationship = entity.relationship(named: request.key) {
                if relationship.isToMany {
                    if request.type != [UUID].self {
                        problem(request.key, "a to-many relationship is declared as [UUID] (the related objects' ids), not \(swiftName)")
                    }
                } else if request.type != UUID.self || !request.isOptional {
                    problem(request.key, "a to-one relationship is declared as UUID? (the related object's id), not \(swiftName)\(request.isOptional ? "?" : "")")
                }
            } else {
                problem(request.key, "the Swift type \(E.self) declares it, but it is not an attribute or relationship of \(entity.name)")
            }
        }
        if isComplete {
            if !recorder.requests.contains(where: { $0.key == "id" }) {
                problem("id", "the Swift type \(E.self) has no id property; declare `var id: UUID`")
            }
            for attribute in entity.attributes where !declared.contains(attribute.name) {
                problem(attribute.name, "the attribute is not a property of the Swift type \(E.self); declare it")
            }
        }
        return (EntityLayout(declaredKeys: declared, isComplete: isComplete), problems)
    }

    /// Whether values of a Swift type fit an attribute type: directly, or as a wrapper (a raw-value
    /// enum) around a type that fits.
    static func fits(_ swiftType: Any.Type, _ type: AttributeType) -> Bool {
        if AttributeConversion.isDirect(swiftType, for: type) { return true }
        if let raw = swiftType as? any RawRepresentable.Type {
            return AttributeConversion.isDirect(rawValueType(raw), for: type)
        }
        return false
    }

    private static func rawValueType<R: RawRepresentable>(_ type: R.Type) -> Any.Type { R.RawValue.self }
}


private struct LayoutCacheKey: Hashable {
    var type: ObjectIdentifier
    var entity: EntityDescription?
}

private let layoutCache = Mutex<[LayoutCacheKey: (EntityLayout, [SchemaProblem])]>([:])

/// What the probe saw: each key the type decoded, with the type asked for.
private final class ProbeRecorder {
    struct Request {
        var key: String
        var type: Any.Type
        var isOptional: Bool
    }
    var requests: [Request] = []
}

/// A decoder that records what a type asks for and hands it made-up values, so the type can be
/// checked without an instance.
private struct ProbeDecoder: Decoder {
    var recorder: ProbeRecorder
    var entity: EntityDescription
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ProbeContainer<Key>(recorder: recorder, entity: entity))
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw probeStop }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { throw probeStop }
}

private let probeStop = DecodingError.dataCorrupted(
    DecodingError.Context(codingPath: [], debugDescription: "an entity is decoded from a keyed container"))

private struct ProbeContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    var recorder: ProbeRecorder
    var entity: EntityDescription
    var codingPath: [any CodingKey] = []
    var allKeys: [Key] { [] }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        recorder.requests.append(.init(key: key.stringValue, type: type, isOptional: false))
        return try Fabricator.make(type, default: entity.attribute(named: key.stringValue)?.defaultValue)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        recorder.requests.append(.init(key: key.stringValue, type: type, isOptional: true))
        return nil
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try record(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try record(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try record(type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try record(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try record(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try record(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try record(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try record(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try record(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try record(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try record(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try record(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try record(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try record(type, key) }
    private func record<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T { try decode(type, forKey: key) }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try recordOptional(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try recordOptional(type, key) }
    private func recordOptional<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        try decodeIfPresent(type, forKey: key)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> { throw probeStop }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw probeStop }
    func superDecoder() throws -> any Decoder { throw probeStop }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw probeStop }
}

/// Makes a value of a type the probe is asked for.
private enum Fabricator {
    static func make<T: Decodable>(_ type: T.Type, default defaultValue: AttributeValue?) throws -> T {
        let samples: [Any] = [
            "", 0 as Int, 0 as Int64, 0 as Int32, 0 as Int16, 0 as Int8, 0 as UInt8, 0 as UInt16, 0 as UInt32,
            0 as UInt64, 0 as UInt, 0.0 as Double, 0.0 as Float, false, Date(timeIntervalSince1970: 0), Data(),
            UUID(), URL(string: "about:blank")!, Decimal(0), [UUID](),
        ]
        for sample in samples {
            if let value = sample as? T { return value }
        }
        if let defaultValue, let value = try? AttributeConversion.swiftValue(defaultValue, as: type) {
            return value
        }
        for json in ["{}", "[]", "0", "\"\"", "false"] {
            if let value = try? JSONDecoder().decode(T.self, from: Data(json.utf8)) { return value }
        }
        throw probeStop
    }
}
