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
            let decoder = EntityDecoder(entity: entity, snapshot: snapshot, toMany: toMany)
            do {
                return try E(from: decoder)
            } catch let error as EntityError {
                throw error
            } catch DecodingError.keyNotFound(let key, _) {
                throw EntityError(entity: entity.name, property: key.stringValue, "no value is stored for it")
            } catch {
                throw EntityError(entity: entity.name, "\(E.self) could not be decoded: \(error)")
            }
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

/// A class, so that the containers copied on every `decode` call copy one reference rather than
/// the entity description and the snapshot.
private final class EntityDecoder: Decoder {
    let entity: EntityDescription
    let snapshot: EntitySnapshot
    let toMany: (String) throws -> [UUID]
    let codingPath: [any CodingKey] = []
    let userInfo: [CodingUserInfoKey: Any] = [:]

    init(entity: EntityDescription, snapshot: EntitySnapshot, toMany: @escaping (String) throws -> [UUID]) {
        self.entity = entity
        self.snapshot = snapshot
        self.toMany = toMany
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
}

private struct EntityDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: EntityDecoder
    var codingPath: [any CodingKey] = []

    var allKeys: [Key] {
        (["id"] + Array(decoder.snapshot.values.keys) + decoder.entity.relationships.filter(\.isToMany).map(\.name))
            .compactMap(Key.init(stringValue:))
    }

    func contains(_ key: Key) -> Bool {
        let name = key.stringValue
        return name == "id" || decoder.snapshot.values[name] != nil
            || decoder.entity.relationship(named: name)?.isToMany == true
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        decoder.snapshot.values[key.stringValue]?.isNull ?? !contains(key)
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try value(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try value(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try value(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try value(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try value(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try value(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try value(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(type, key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try value(type, key)
    }

    private func value<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T {
        let name = key.stringValue
        let entity = decoder.entity
        if name == "id" {
            guard let id = decoder.snapshot.id as? T else {
                throw EntityError(entity: entity.name, property: "id", "the id must be declared as UUID")
            }
            return id
        }
        if let relationship = entity.relationship(named: name), relationship.isToMany {
            guard let ids = try decoder.toMany(name) as? T else {
                throw EntityError(entity: entity.name, property: name, "a to-many relationship is declared as [UUID]")
            }
            return ids
        }
        guard let stored = decoder.snapshot.values[name] else {
            if entity.attribute(named: name) == nil && entity.relationship(named: name) == nil {
                throw EntityError(entity: entity.name, property: name, "not an attribute or relationship of \(entity.name)")
            }
            throw EntityError(entity: entity.name, property: name, "no value is stored for it")
        }
        if stored.isNull {
            throw EntityError(
                entity: entity.name, property: name, "the stored value is null but the Swift property is not optional")
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

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw EntityError(
            entity: decoder.entity.name, property: key.stringValue,
            "nested containers are not supported; use a json attribute for structured values")
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw EntityError(
            entity: decoder.entity.name, property: key.stringValue,
            "nested containers are not supported; use a json attribute for structured values")
    }

    func superDecoder() throws -> any Decoder { decoder }
    func superDecoder(forKey key: Key) throws -> any Decoder { decoder }
}
