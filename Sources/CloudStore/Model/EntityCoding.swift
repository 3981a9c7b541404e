import Foundation

extension Schema {
    /// The snapshot of a Swift entity value: its attributes and relationships as attribute values.
    ///
    /// Throws an ``EntityError`` naming the property when the value does not fit the schema (a
    /// property of the wrong type, nil for an attribute that is not optional, a property the entity
    /// does not have). Dates are rounded to the millisecond, as they are stored.
    public func snapshot<E: Entity>(of value: E) throws -> EntitySnapshot {
        let (layout, problems) = layout(of: E.self)
        if let problem = problems.first {
            throw EntityError(entity: problem.entity ?? E.entityName, property: problem.property, problem.message)
        }
        guard let entity = entity(named: E.entityName) else {
            throw EntityError(entity: E.entityName, "the entity is not in schema \(name)")
        }
        let state = EntityEncodingState(entity: entity, id: value.id)
        do {
            try value.encode(to: EntityEncoder(state: state))
        } catch let error as EntityError {
            throw error
        } catch {
            throw EntityError(entity: entity.name, "\(E.self) could not be encoded: \(error)")
        }
        if let error = state.errors.first { throw error }
        var snapshot = EntitySnapshot(entityName: entity.name, id: value.id, values: state.values, toMany: state.toMany)
        for attribute in entity.attributes where snapshot.values[attribute.name] == nil {
            guard attribute.isOptional else {
                throw EntityError(entity: entity.name, property: attribute.name, "the value is nil but the attribute is not optional")
            }
            snapshot.values[attribute.name] = .null
        }
        for relationship in entity.toOneRelationships
        where layout.declaredKeys.contains(relationship.name) && snapshot.values[relationship.name] == nil {
            snapshot.values[relationship.name] = .null
        }
        return snapshot
    }

    /// The Swift entity value of a snapshot.
    ///
    /// `toMany` gives the ids related through a to-many relationship; it is called only for the
    /// to-many relationships the Swift type declares, when it decodes them.
    public func entity<E: Entity>(
        _ type: E.Type, from snapshot: EntitySnapshot, toMany: (String) throws -> [UUID] = { _ in [] }
    ) throws -> E {
        guard let entity = entity(named: E.entityName) else {
            throw EntityError(entity: E.entityName, "the entity is not in schema \(name)")
        }
        return try withoutActuallyEscaping(toMany) { toMany in
            let values = SnapshotValues(entity: entity, snapshot: snapshot, toMany: toMany)
            return try EntityDecoder(entity: entity, values: values).decode(E.self)
        }
    }
}

/// What the entity encoder has collected so far.
final class EntityEncodingState {
    let entity: EntityDescription
    let id: UUID
    var values: [String: AttributeValue] = [:]
    var toMany: [String: [UUID]] = [:]
    var errors: [EntityError] = []

    init(entity: EntityDescription, id: UUID) {
        self.entity = entity
        self.id = id
    }

    func fail(_ key: String?, _ message: String) {
        errors.append(EntityError(entity: entity.name, property: key, message))
    }

    func storeNil(_ key: String) {
        if entity.attribute(named: key) != nil || entity.relationship(named: key).map({ !$0.isToMany }) == true {
            values[key] = .null
        } else if entity.relationship(named: key) != nil {
            toMany[key] = []
        } else if key != "id" {
            fail(key, "not an attribute or relationship of \(entity.name)")
        }
    }

    func store(_ value: Any, _ key: String) {
        if key == "id" {
            if value as? UUID != id { fail("id", "the id must be the UUID the entity's id property returns") }
            return
        }
        if let attribute = entity.attribute(named: key) {
            var converted = AttributeConversion.attributeValue(value, as: attribute.type)
            if converted == nil, attribute.type != .json, let encodable = value as? any Encodable,
                let captured = SingleValueCapture.capture(encodable)
            {
                converted = AttributeConversion.attributeValue(captured, as: attribute.type)
            }
            guard let converted else {
                return fail(
                    key,
                    "the Swift value is a \(AttributeConversion.name(type(of: value))) but the attribute is \(article(attribute.type.rawValue)) \(attribute.type.rawValue); declare it as \(AttributeConversion.suggestedSwiftType(for: attribute.type))")
            }
            values[key] = converted
        } else if let relationship = entity.relationship(named: key) {
            if relationship.isToMany {
                guard let ids = value as? [UUID] else { return fail(key, "a to-many relationship is declared as [UUID]") }
                toMany[key] = ids
            } else {
                guard let id = value as? UUID else { return fail(key, "a to-one relationship is declared as UUID?") }
                values[key] = .uuid(id)
            }
        } else {
            fail(key, "not an attribute or relationship of \(entity.name)")
        }
    }
}

private struct EntityEncoder: Encoder {
    let state: EntityEncodingState
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(EntityEncodingContainer<Key>(state: state))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        state.fail(nil, "an entity encodes itself into a keyed container (one key per property)")
        return UnsupportedUnkeyedEncoding()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        state.fail(nil, "an entity encodes itself into a keyed container (one key per property)")
        return SingleValueCapture()
    }
}

private struct EntityEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let state: EntityEncodingState
    var codingPath: [any CodingKey] = []

    mutating func encodeNil(forKey key: Key) throws { state.storeNil(key.stringValue) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: String, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: Double, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: Float, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: Int, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { state.store(value, key.stringValue) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { state.store(value, key.stringValue) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        state.store(value, key.stringValue)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        state.fail(key.stringValue, "nested containers are not supported; use a json attribute for structured values")
        return KeyedEncodingContainer(UnsupportedKeyedEncoding<NestedKey>())
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        state.fail(key.stringValue, "nested containers are not supported; use a json attribute for structured values")
        return UnsupportedUnkeyedEncoding()
    }

    mutating func superEncoder() -> any Encoder {
        state.fail(nil, "super encoders are not supported")
        return SingleValueCapture()
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        state.fail(key.stringValue, "super encoders are not supported")
        return SingleValueCapture()
    }
}

/// Where an ``EntityDecoder`` reads the object it decodes: a snapshot, or the current row of a
/// fetch (`EntityFetch`, which decodes straight from the statement, as GRDB decodes its records).
protocol StoredEntityValues: AnyObject {
    /// The object's id.
    var id: UUID { get }
    /// The names that have a stored value.
    var storedNames: [String] { get }
    /// What the object holds for `name`. Throws when its stored value cannot be read (a row
    /// written outside the store).
    func property(_ name: String) throws -> StoredEntityProperty
    /// Whether the stored value of `name` is null, or nil when there is none; cheaper than reading it.
    func storedValueIsNull(_ name: String) -> Bool?
    /// Whether `name` is a to-many relationship of the entity.
    func isToMany(_ name: String) -> Bool
    /// The ids related through a to-many relationship.
    func toMany(_ name: String) throws -> [UUID]
}

/// What an object holds for a name: the stored value of an attribute or to-one relationship, a
/// to-many relationship (read with ``StoredEntityValues/toMany(_:)``), or nothing.
enum StoredEntityProperty {
    case value(AttributeValue)
    case toMany
    case absent
}

/// Decodes Swift entity values from stored values, checking them against the entity: every error
/// is an ``EntityError`` naming the property, except a stored value that cannot be read, whose
/// error is reported as is. A class, so that the containers copied on every `decode` call copy
/// one reference; a fetch decodes all its rows with one decoder.
final class EntityDecoder: Decoder {
    let entity: EntityDescription
    let values: any StoredEntityValues
    let codingPath: [any CodingKey] = []
    let userInfo: [CodingUserInfoKey: Any] = [:]

    init(entity: EntityDescription, values: any StoredEntityValues) {
        self.entity = entity
        self.values = values
    }

    /// The Swift value of the object `values` holds now.
    func decode<E: Entity>(_ type: E.Type) throws -> E {
        do {
            return try E(from: self)
        } catch let error as EntityError {
            throw error
        } catch let failure as UnreadableStoredValue {
            throw failure.error
        } catch DecodingError.keyNotFound(let key, _) {
            throw EntityError(entity: entity.name, property: key.stringValue, "no value is stored for it")
        } catch {
            throw EntityError(entity: entity.name, "\(E.self) could not be decoded: \(error)")
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(EntityDecodingContainer<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw EntityError(entity: entity.name, "an entity decodes itself from a keyed container (one key per property)")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw EntityError(entity: entity.name, "an entity decodes itself from a keyed container (one key per property)")
    }

    // MARK: Per key (the containers forward here, so that these are specialised per Swift type
    // without depending on the coding key type)

    var allNames: [String] {
        ["id"] + values.storedNames + entity.relationships.filter(\.isToMany).map(\.name)
    }

    func contains(_ name: String) -> Bool {
        name == "id" || values.storedValueIsNull(name) != nil || values.isToMany(name)
    }

    func decodeNil(_ name: String) -> Bool {
        values.storedValueIsNull(name) ?? !contains(name)
    }

    func value<T: Decodable>(_ type: T.Type, _ name: String) throws -> T {
        // Dates, ids and the other Foundation values come through the generic `decode`: decode them
        // with the code specialised for their type, as `String` and the numbers are.
        if T.self == Date.self { return try convertedValue(Date.self, name) as! T }
        if T.self == UUID.self { return try convertedValue(UUID.self, name) as! T }
        if T.self == Data.self { return try convertedValue(Data.self, name) as! T }
        if T.self == URL.self { return try convertedValue(URL.self, name) as! T }
        if T.self == Decimal.self { return try convertedValue(Decimal.self, name) as! T }
        return try convertedValue(type, name)
    }

    private func convertedValue<T: Decodable>(_ type: T.Type, _ name: String) throws -> T {
        if name == "id" {
            guard let id = values.id as? T else {
                throw EntityError(entity: entity.name, property: "id", "the id must be declared as UUID")
            }
            return id
        }
        let property: StoredEntityProperty
        do {
            property = try values.property(name)
        } catch {
            throw UnreadableStoredValue(error: error)
        }
        let stored: AttributeValue
        switch property {
        case .value(let value):
            stored = value
        case .toMany:
            guard let ids = try values.toMany(name) as? T else {
                throw EntityError(entity: entity.name, property: name, "a to-many relationship is declared as [UUID]")
            }
            return ids
        case .absent:
            if entity.attribute(named: name) == nil && entity.relationship(named: name) == nil {
                throw EntityError(entity: entity.name, property: name, "not an attribute or relationship of \(entity.name)")
            }
            throw EntityError(entity: entity.name, property: name, "no value is stored for it")
        }
        if stored.isNull {
            throw EntityError.storedNull(entity: entity.name, property: name, id: values.id)
        }
        let converted: T?
        do {
            converted = try AttributeConversion.swiftValue(stored, as: type)
        } catch {
            throw EntityError(
                entity: entity.name, property: name,
                "the stored value \(stored) cannot be read as \(AttributeConversion.name(type)): \(error)")
        }
        guard let converted else {
            throw EntityError(
                entity: entity.name, property: name, "the stored value \(stored) cannot be read as \(AttributeConversion.name(type))")
        }
        return converted
    }

    func nestedContainerError(_ name: String) -> EntityError {
        EntityError(
            entity: entity.name, property: name, "nested containers are not supported; use a json attribute for structured values")
    }
}

/// A stored value that could not be read; ``EntityDecoder/decode(_:)`` reports its error as is.
private struct UnreadableStoredValue: Error {
    let error: any Error
}

/// The values of a snapshot, for the decoder.
private final class SnapshotValues: StoredEntityValues {
    let entity: EntityDescription
    let snapshot: EntitySnapshot
    let toManyIDs: (String) throws -> [UUID]

    init(entity: EntityDescription, snapshot: EntitySnapshot, toMany: @escaping (String) throws -> [UUID]) {
        self.entity = entity
        self.snapshot = snapshot
        self.toManyIDs = toMany
    }

    var id: UUID { snapshot.id }
    var storedNames: [String] { Array(snapshot.values.keys) }

    func property(_ name: String) -> StoredEntityProperty {
        if isToMany(name) { return .toMany }
        return snapshot.values[name].map(StoredEntityProperty.value) ?? .absent
    }

    func storedValueIsNull(_ name: String) -> Bool? { snapshot.values[name]?.isNull }
    func isToMany(_ name: String) -> Bool { entity.relationship(named: name)?.isToMany == true }
    func toMany(_ name: String) throws -> [UUID] { try toManyIDs(name) }
}

private struct EntityDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: EntityDecoder
    var codingPath: [any CodingKey] = []

    var allKeys: [Key] { decoder.allNames.compactMap(Key.init(stringValue:)) }
    func contains(_ key: Key) -> Bool { decoder.contains(key.stringValue) }
    func decodeNil(forKey key: Key) throws -> Bool { decoder.decodeNil(key.stringValue) }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.value(type, key.stringValue) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.value(type, key.stringValue) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.value(type, key.stringValue) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.value(type, key.stringValue) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder.value(type, key.stringValue) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.value(type, key.stringValue) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.value(type, key.stringValue) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.value(type, key.stringValue) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder.value(type, key.stringValue) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.value(type, key.stringValue) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.value(type, key.stringValue) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.value(type, key.stringValue) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.value(type, key.stringValue) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.value(type, key.stringValue) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decoder.value(type, key.stringValue) }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw decoder.nestedContainerError(key.stringValue)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw decoder.nestedContainerError(key.stringValue)
    }

    func superDecoder() throws -> any Decoder { decoder }
    func superDecoder(forKey key: Key) throws -> any Decoder { decoder }
}
