//! The retry budget's fleet half: the same arithmetic as the engine's local
//! budget (`engine::budget`) with the rest of the fleet's counts added, and the
//! rounds that exchange them through Redis. Outside the engine, because it talks
//! to Redis.

pub mod redis;
