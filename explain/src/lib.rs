pub mod cel;
